package mcplimit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI is the admin endpoint `/mcp_ratelimit/`: `GET /mcp_ratelimit/`
// returns every zone's limits in force, tracked entries, refusals per
// layer and quota store state; `GET /mcp_ratelimit/<zone>` one zone; and
// `GET /mcp_ratelimit/<zone>/identities[?limit=<n>]` the proven identities,
// most recently used first (default 100 of them), so operators can learn
// fingerprints; and `GET /mcp_ratelimit/<zone>/identities/<fingerprint>` one
// identity's proven state, bucket levels and quota usage.
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.mcp_ratelimit",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Provision registers every running zone's metrics in the registry of the
// config Caddy is loading: its admin endpoint serves that registry from
// now on (it is provisioned before any handler), even when Caddy then
// rejects the config, and the zones still running must stay on /metrics.
// A zone that goes takes itself out of every registry (zone.Destruct).
func (a *AdminAPI) Provision(ctx caddy.Context) error {
	reg := ctx.GetMetricsRegistry()
	zones.Range(func(_, v any) bool {
		if z, ok := v.(*zone); ok {
			z.metrics.serveAdmin(reg)
		}
		return true
	})
	return nil
}

// Routes returns the admin routes of the module.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/mcp_ratelimit/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

func (a *AdminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed", r.Method)}
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/mcp_ratelimit"), "/"), "/")
	var body any
	switch {
	case len(parts) == 1 && parts[0] == "":
		all := map[string]any{}
		zones.Range(func(k, v any) bool {
			all[k.(string)] = v.(*zone).status()
			return true
		})
		body = map[string]any{"zones": all}
	case len(parts) == 1:
		z, err := lookupZone(parts[0])
		if err != nil {
			return err
		}
		body = z.status()
	case len(parts) == 2 && parts[1] == "identities":
		z, err := lookupZone(parts[0])
		if err != nil {
			return err
		}
		limit, err := listLimit(r.URL.Query().Get("limit"))
		if err != nil {
			return err
		}
		body = z.knownView(limit, time.Now())
	case len(parts) == 3 && parts[1] == "identities":
		z, err := lookupZone(parts[0])
		if err != nil {
			return err
		}
		st, err := z.identityStatus(parts[2])
		if err != nil {
			return err
		}
		body = st
	default:
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no such resource: %s", r.URL.Path)}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(body)
}

// defaultListLimit is how many identities a listing shows without ?limit.
const defaultListLimit = 100

// listLimit parses the limit query parameter of a listing.
func listLimit(v string) (int, error) {
	if v == "" {
		return defaultListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("limit %q: want a positive integer", v)}
	}
	return n, nil
}

// knownView lists the zone's proven identities on this instance, the most
// recently used first, at most limit of them, with the total.
func (z *zone) knownView(limit int, now time.Time) map[string]any {
	type entry struct {
		fp   [16]byte
		last time.Time
	}
	ttl := z.capacity.Load().knownTTL
	var all []entry
	z.known.Each(func(fp [16]byte, last time.Time) {
		if ttl <= 0 || now.Sub(last) < ttl {
			all = append(all, entry{fp, last})
		}
	})
	slices.SortFunc(all, func(a, b entry) int { return b.last.Compare(a.last) })
	list := make([]map[string]any, 0, min(limit, len(all)))
	for _, e := range all[:min(limit, len(all))] {
		list = append(list, map[string]any{
			"fingerprint": fingerprintHex(e.fp),
			"last_used":   e.last.UTC().Format(time.RFC3339Nano),
		})
	}
	return map[string]any{"total": len(all), "identities": list}
}

func lookupZone(name string) (*zone, error) {
	var found *zone
	zones.Range(func(k, v any) bool {
		if k.(string) == name {
			found = v.(*zone)
			return false
		}
		return true
	})
	if found == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("unknown zone %q", name)}
	}
	return found, nil
}

// status is a zone's admin view.
func (z *zone) status() map[string]any {
	m := z.metrics
	refusals, dry := map[string]uint64{}, map[string]uint64{}
	for l := range numLayers {
		refusals[layerNames[l]] = m.refusedN[l].Load()
		dry[layerNames[l]] = m.dryN[l].Load()
	}
	limits := z.pol.Load().view()
	// The zone applies the most generous of its handlers' (noteCapacity).
	c := z.capacity.Load()
	limits["known_ttl"], limits["max_known"] = c.knownTTL.String(), c.maxKnown
	return map[string]any{
		"limits":             limits,
		"tracked":            z.tracked(),
		"refusals":           refusals,
		"dry_run_refusals":   dry,
		"admitted":           m.admittedN.Load(),
		"inflight":           m.inflightN.Load(),
		"upstream_throttled": m.upstreamN.Load(),
		"quota_store":        storeView(z.quotaStoreState()),
		"store":              z.storeStatus(),
	}
}

// tracked counts what the zone holds in memory, by kind.
func (z *zone) tracked() map[string]int {
	return map[string]int{
		"preauth_buckets": z.preauth.Len(),
		"tenant_buckets":  z.tenants.Len(),
		"group_buckets":   z.groups.Len(),
		"known":           z.known.Len(),
		"quota_entries":   z.quota.State().Tracked,
	}
}

// quotaStoreState is the state the admin view's quota_store shows: the
// flushes to storage, degraded while they fail, and whenever
// mcp_ratelimit_quota_degraded is 1: with a Redis store, which holds the
// quotas, while Redis is unreachable, its error named unless storage
// failed as well.
func (z *zone) quotaStoreState() quota.State {
	st := z.quotaState()
	if r := z.redis.Load(); r != nil && r.degraded.Load() && !st.Degraded {
		r.mu.Lock()
		st.Degraded, st.LastError, st.LastErrorTime = true, r.lastErr, r.lastErrAt
		r.mu.Unlock()
	}
	return st
}

func storeView(st quota.State) map[string]any {
	v := map[string]any{
		"degraded":   st.Degraded,
		"last_error": st.LastError,
		"pending":    st.Pending,
		"flushes":    st.Flushes,
		"failures":   st.Failures,
		"last_flush": nil,
	}
	if !st.LastFlush.IsZero() {
		v["last_flush"] = st.LastFlush.UTC().Format(time.RFC3339Nano)
	}
	if !st.LastErrorTime.IsZero() {
		v["last_error_time"] = st.LastErrorTime.UTC().Format(time.RFC3339Nano)
	}
	return v
}

// identityStatus is one identity's admin view; a malformed fingerprint is
// a 400, an unknown one a 404.
func (z *zone) identityStatus(fpHex string) (map[string]any, error) {
	fp, err := parseFingerprint(fpHex)
	if err != nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	now := time.Now()
	// With trust_identity every identity is proven on sight, and none is
	// recorded: one the zone holds state of is shown as proven.
	known := z.known.Contains(fp, now)
	out := map[string]any{"fingerprint": fpHex, "proven": known || z.pol.Load().trustIdentity}
	if r := z.redis.Load(); r == nil || r.degraded.Load() || !redisUsage(r, fpHex, out, now) {
		z.localUsage(fp, fpHex, out, now)
	}
	out["inflight"] = z.perID.Count(fp)
	_, override := z.pol.Load().overrides[fp]
	if override {
		out["override"] = true
	}
	_, tokens := out["tenant_tokens"]
	if !known && !tokens && !override && len(out["quota_used"].(map[string]int64)) == 0 {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("unknown identity %s in zone %s", fpHex, z.name)}
	}
	return out, nil
}

// localUsage fills an identity's view from this instance's tenant bucket
// and quota counts.
func (z *zone) localUsage(fp [16]byte, fpHex string, out map[string]any, now time.Time) {
	tokens, ok := z.tenants.Tokens(fp, now)
	switch lim, known, most := z.pol.Load().tenantLimitOf(fp); {
	case known:
		tokens, ok = z.tenants.TokensUnder(fp, toBuckets(lim), now)
	case most >= 0:
		// No call finds more than the largest burst it may have now.
		tokens = min(tokens, float64(most))
	}
	if ok {
		out["tenant_tokens"] = tokens
	}
	usage := map[string]int64{}
	for _, p := range quotaPeriods {
		if used := z.quota.Used([]byte("i/"+fpHex), p, now); used != 0 {
			usage[p.String()] = used
		}
	}
	out["quota_used"], out["source"] = usage, "local"
}

// tenantLimitOf returns the tenant limit identity fp gets whichever tier
// its requests match, so that its bucket is shown at the level its next
// call finds after a limit change. known is false when tiers give it
// different limits (which one applies depends on the request) or its
// tenant layer is off; most is then the largest burst of the limits it
// may get, -1 when none has its tenant layer on.
func (p *policy) tenantLimitOf(fp [16]byte) (lim bucketLimit, known bool, most int) {
	o := p.overrides[fp]
	of := func(l limits) limits {
		if o != nil {
			return o.apply(l)
		}
		return l
	}
	first := of(p.base)
	known, most = !first.tenantOff, -1
	if known {
		most = first.tenant.burst
	}
	for i := range p.tiers {
		l := of(p.tiers[i].limits)
		if l.tenantOff != first.tenantOff || l.tenant.rate != first.tenant.rate || l.tenant.burst != first.tenant.burst {
			known = false
		}
		if !l.tenantOff {
			most = max(most, l.tenant.burst)
		}
	}
	return first.tenant, known, most
}

// view is the policy as the admin API shows it.
func (p *policy) view() map[string]any {
	tools := map[string]any{}
	for name, t := range p.tools {
		args := map[string]float64{}
		for _, a := range t.args {
			args[a.name] = a.max
		}
		cost, ok := p.base.costs[name]
		if !ok {
			cost = 1 // what a call of a tool without a cost line costs
		}
		tools[name] = map[string]any{"quota": quotaView(t.quota), "args": args, "fail_closed": t.failClosed, "cost": cost}
	}
	tiers := make([]any, 0, len(p.tiers))
	for _, t := range p.tiers {
		v := limitsView(t.limits)
		v["name"], v["match"] = t.name, map[string]any{"placeholder": t.placeholder, "values": t.values}
		tiers = append(tiers, v)
	}
	overrides := map[string]any{}
	for fp, o := range p.overrides {
		overrides[fingerprintHex(fp)] = p.overrideView(o)
	}
	gateways := make([]any, 0, len(p.gateways))
	for _, g := range p.gateways {
		cidrs := make([]string, len(g.prefixes))
		for i, pfx := range g.prefixes {
			cidrs[i] = pfx.String()
		}
		sort.Strings(cidrs)
		gateways = append(gateways, map[string]any{"cidrs": cidrs, "preauth": bucketView(g.limit, false)})
	}
	v := limitsView(p.base)
	v["preauth"] = bucketView(p.preauth, p.preauthOff)
	v["global"] = bucketView(p.global, p.globalOff)
	v["anonymous"] = bucketView(p.anonymous, !p.anonymousOn)
	v["gateways"] = gateways
	v["meter"] = meterView(p)
	v["max_body"], v["max_batch"] = p.maxBody, p.maxBatch
	v["known_ttl"], v["max_known"] = p.knownTTL.String(), p.maxKnown
	v["flush_interval"] = p.flush.String()
	v["ipv4_prefix"], v["ipv6_prefix"] = p.v4, p.v6
	v["error_code"], v["refuse_with"] = p.errorCode, [...]string{"status", "jsonrpc", "tool_result"}[p.refuseWith]
	v["tools"], v["tiers"], v["overrides"] = tools, tiers, overrides
	v["dry_run"], v["trust_identity"] = p.dryRun, p.trustIdentity
	if p.groupKey != "" {
		v["group"] = map[string]any{"key": p.groupKey, "rate": p.group.text, "burst": p.group.burst, "quota": quotaView(p.groupQuota)}
	}
	return v
}

// overrideView shows an override as the limits in force for its identity:
// over the top-level limits when no tier matches the request, and in
// in_tier over each tier's, since what the override leaves unset comes
// from the tier a request matches. sets lists what the override sets.
func (p *policy) overrideView(o *override) map[string]any {
	v := limitsView(o.apply(p.base))
	inTier := map[string]any{}
	for _, t := range p.tiers {
		inTier[t.name] = limitsView(o.apply(t.limits))
	}
	sets := []string{}
	for _, f := range []struct {
		name string
		set  bool
	}{{"tenant", o.tenant}, {"quota", o.quota}, {"concurrency", o.concurrency}, {"costs", len(o.costs) > 0}} {
		if f.set {
			sets = append(sets, f.name)
		}
	}
	v["in_tier"], v["sets"] = inTier, sets
	return v
}

func meterView(p *policy) []string {
	if p.meter.All {
		return []string{"*"}
	}
	return p.meter.Methods
}

func limitsView(l limits) map[string]any {
	return map[string]any{
		"tenant":      bucketView(l.tenant, l.tenantOff),
		"quota":       quotaView(l.quota),
		"concurrency": map[string]int{"max": l.concurrency.Max, "per_identity": l.concurrency.PerIdentity},
		"costs":       l.costs,
	}
}

func bucketView(b bucketLimit, off bool) any {
	if off {
		return "off"
	}
	return map[string]any{"rate": b.text, "burst": b.burst}
}

func quotaView(q quotaLimit) any {
	if !q.any() {
		return "off"
	}
	v := map[string]int64{}
	if q.day > 0 {
		v["day"] = q.day
	}
	if q.month > 0 {
		v["month"] = q.month
	}
	return v
}

// Interface guards
var (
	_ caddy.AdminRouter = (*AdminAPI)(nil)
	_ caddy.Provisioner = (*AdminAPI)(nil)
)

// redisUsage fills an identity's view from the Redis store, which holds
// the counts of every instance: its quota use per period, and its tenant
// bucket as stored at its last metered call (tenant_tokens_at, on Redis's
// clock; the refill since depends on the limits the call ran under). It
// reports false, filling nothing, when Redis does not answer in time.
func redisUsage(r *zoneRedis, fpHex string, out map[string]any, now time.Time) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	tokens, at, ok, err := r.store.Tokens(ctx, "t/"+fpHex)
	if err != nil {
		return false
	}
	usage := map[string]int64{}
	for _, p := range quotaPeriods {
		n, err := r.store.Used(ctx, "i/"+fpHex, p, now)
		if err != nil {
			return false
		}
		if n != 0 {
			usage[p.String()] = n
		}
	}
	if ok {
		out["tenant_tokens"], out["tenant_tokens_at"] = tokens, at.UTC().Format(time.RFC3339Nano)
	}
	out["quota_used"], out["source"] = usage, "redis"
	return true
}
