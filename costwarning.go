package mcplimit

import (
	"maps"
	"slices"

	"go.uber.org/zap"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
)

// warnUnpayableCosts warns about tool costs above the tenant burst of the
// top-level limits or of a tier: no call of that tool can ever pass for
// those tenants (each is told so when refused). It is a warning, not an
// error: an override may give some identities the burst.
func warnUnpayableCosts(pol *policy, logger *zap.Logger) {
	check := func(l limits) {
		if l.tenantOff || l.tenant.rate <= 0 {
			return
		}
		for _, tool := range slices.Sorted(maps.Keys(l.costs)) {
			if c := l.costs[tool]; c > int64(l.tenant.burst) {
				logger.Warn("a tool costs more than the tenant burst: no call of it can pass for these tenants unless an override raises their burst",
					zap.String("zone", pol.zone), zap.String("tier", l.tier), zap.String("tool", tool), zap.Int64("cost", c), zap.Int("burst", l.tenant.burst))
			}
		}
	}
	check(pol.base)
	for _, t := range pol.tiers {
		check(t.limits)
	}
}

// warnUnmeteredToolPolicies warns about tool policies a handler whose
// `meter` list leaves out tools/call never applies: its tool calls cost
// nothing, so a tool's cost, quota and fail_closed do nothing there. Its
// `arg` bounds still refuse: they judge what a call asks for, not what it
// costs.
func warnUnmeteredToolPolicies(pol *policy, logger *zap.Logger) {
	if pol.meter.All || slices.Contains(pol.meter.Methods, "tools/call") {
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
