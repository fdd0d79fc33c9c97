package mcplimit

import (
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// warnUnpayableCosts warns about tool costs that no call can pay: above
// the tenant burst or the identity's daily or monthly quota of the
// top-level limits or of a tier, or above the group's burst or quota or
// the zone's global burst, which hold for every caller. Each refused call
// is told so; the warning comes when the config loads. It is a warning,
// not an error: an override may give some identities more, and a limit
// changed live may come first. A handler whose meter list leaves out
// tools/call charges no tool's cost (warnUnmeteredToolPolicies says so).
func warnUnpayableCosts(pol *policy, logger *zap.Logger) {
	if !metersToolCalls(pol) {
		return
	}
	check := func(l limits) {
		for _, tool := range slices.Sorted(maps.Keys(l.costs)) {
			c := l.costs[tool]
			if limit, allows, whom := unpayable(pol, l, c); limit != "" {
				logger.Warn("a tool costs more than the "+limit+" allows: no call of it can pass "+whom,
					zap.String("zone", pol.zone), zap.String("tier", l.tier), zap.String("tool", tool), zap.Int64("cost", c),
					zap.String("limit", limit), zap.Int64("allows", allows))
			}
		}
	}
	check(pol.base)
	for _, t := range pol.tiers {
		check(t.limits)
	}
}

// unpayable returns the first limit under l that a call costing c
// exceeds on its own, what that limit allows, and whom it holds back; ""
// when none does. A layer that is off or unset has a zero limit, which
// limits nothing here.
func unpayable(pol *policy, l limits, c int64) (limit string, allows int64, whom string) {
	const tenants, everyone = "for these tenants unless an override raises it", "for any caller"
	for _, b := range []struct {
		limit  string
		allows int64
		whom   string
	}{
		{"tenant burst", int64(l.tenant.burst), tenants},
		{"daily quota", l.quota.day, tenants},
		{"monthly quota", l.quota.month, tenants},
		{"group burst", int64(pol.group.burst), everyone},
		{"group's daily quota", pol.groupQuota.day, everyone},
		{"group's monthly quota", pol.groupQuota.month, everyone},
		{"global burst", int64(pol.global.burst), everyone},
	} {
		if b.allows > 0 && c > b.allows {
			return b.limit, b.allows, b.whom
		}
	}
	return "", 0, ""
}

// warnUnmeteredToolPolicies warns about tool policies a handler whose
// `meter` list leaves out tools/call never applies: its tool calls cost
// nothing, so a tool's cost, quota and fail_closed do nothing there. Its
// `arg` bounds still refuse: they judge what a call asks for, not what it
// costs.
func warnUnmeteredToolPolicies(pol *policy, logger *zap.Logger) {
	if metersToolCalls(pol) {
		return
	}
	var tools []string
	costly := func(costs map[string]int64) {
		tools = slices.AppendSeq(tools, maps.Keys(costs))
	}
	costly(pol.base.costs)
	for _, t := range pol.tiers {
		costly(t.limits.costs)
	}
	for _, o := range pol.overrides {
		costly(o.costs)
	}
	for name, t := range pol.tools {
		if t.quota.any() || t.failClosed {
			tools = append(tools, name)
		}
	}
	if len(tools) == 0 {
		return
	}
	slices.Sort(tools)
	logger.Warn("tool costs, quotas and fail_closed apply to tools/call, which this handler's meter list leaves out: they do nothing here (arg bounds still refuse)",
		zap.String("zone", pol.zone), zap.Strings("tools", slices.Compact(tools)), zap.Strings("meter", pol.meter.Methods))
}

// metersToolCalls reports whether pol's meter list charges tools/call.
func metersToolCalls(pol *policy) bool {
	return pol.meter.All || slices.Contains(pol.meter.Methods, jsonrpc.ToolsCall)
}

// warnUnknownMethods warns about methods in a handler's meter list that
// MCP does not define for a client to send (a vendor's own method, or a
// server's, such as sampling/createMessage): they cost only if a client
// sends them, and a misspelt method leaves the calls meant free of charge.
// Close misspellings of MCP's methods are refused by compile.
func warnUnknownMethods(pol *policy, logger *zap.Logger) {
	var unknown []string
	for _, m := range pol.meter.Methods {
		if !jsonrpc.ClientMethod(m) {
			unknown = append(unknown, m)
		}
	}
	if len(unknown) > 0 {
		logger.Warn("the meter list names methods MCP does not define for a client to send: they cost only when a client sends them by that exact name",
			zap.String("zone", pol.zone), zap.Strings("methods", unknown))
	}
}
