package mcplimit

import (
	"encoding/hex"
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/clientip"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/jsonrpc"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// Defaults from SPEC.md.
const (
	defaultZone      = "default"
	defaultIdentity  = "{http.request.header.Authorization}"
	defaultKnownTTL  = 24 * time.Hour
	defaultMaxKnown  = 100000
	defaultMaxBody   = 1 << 20
	defaultMaxBatch  = 32
	defaultFlush     = 30 * time.Second
	defaultErrorCode = -31004
	defaultV4Prefix  = 32
	defaultV6Prefix  = 64
	defaultQuotaDay  = 5000
)

// maxMaxBody bounds max_body: a body is held in memory while it is
// classified, and the classifier reads at most 2GiB of it.
const maxMaxBody = 1 << 30

// refuseMode is how refusals are answered.
type refuseMode uint8

const (
	refuseStatus refuseMode = iota
	refuseJSONRPC
	refuseToolResult
)

// limits are the limits in force for one request's identity.
type limits struct {
	tier        string
	tenant      bucketLimit
	tenantOff   bool
	quota       quotaLimit
	concurrency Concurrency
	costs       map[string]int64
	rlPolicy    []string // RateLimit-Policy value; shared, never modified
}

// override is a compiled per-identity override: the fields it sets
// replace those of whichever tier applies. What a field leaves unset (a
// tenant burst without a rate, say) comes from that tier, so the override
// is compiled over each tier's limits, keyed by tier name ("" for none).
type override struct {
	limits      map[string]limits
	tenant      bool
	quota       bool
	concurrency bool
	costs       map[string]int64
}

// apply returns l with the override's fields in place.
func (o *override) apply(l limits) limits {
	ov := o.limits[l.tier]
	if o.tenant {
		l.tenant, l.tenantOff = ov.tenant, ov.tenantOff
	}
	if o.quota {
		l.quota = ov.quota
	}
	if o.concurrency {
		l.concurrency = ov.concurrency
	}
	if len(o.costs) > 0 {
		merged := make(map[string]int64, len(l.costs)+len(o.costs))
		for k, v := range l.costs {
			merged[k] = v
		}
		for k, v := range o.costs {
			merged[k] = v
		}
		l.costs = merged
	}
	if o.tenant || o.quota {
		l.rlPolicy = policyHeader(l)
	}
	return l
}

// toolPolicy is a compiled ToolPolicy.
type toolPolicy struct {
	quota      quotaLimit
	args       []argBound
	failClosed bool
}

// argBound is one `arg <name> max <n>` line.
type argBound struct {
	name string
	max  float64
}

// tier is a compiled Tier.
type tier struct {
	name        string
	placeholder string
	values      []string
	limits      limits
}

// gateway is a compiled Gateway.
type gateway struct {
	prefixes []netip.Prefix
	limit    bucketLimit
	rlPolicy []string // RateLimit-Policy value of its pre-auth bucket
}

// policy is the compiled, immutable form of a Handler's configuration.
type policy struct {
	zone          string
	identity      []string
	trustIdentity bool
	reject        []int
	knownTTL      time.Duration
	maxKnown      int
	meter         jsonrpc.Meter
	maxBody       int64
	maxBatch      int
	preauth       bucketLimit
	preauthOff    bool
	preauthPolicy []string // RateLimit-Policy value of the pre-auth bucket
	gateways      []gateway
	base          limits
	global        bucketLimit
	globalOff     bool
	anonymous     bucketLimit
	anonymousOn   bool
	v4, v6        int
	flush         time.Duration
	errorCode     int
	refuseWith    refuseMode
	groupKey      string
	group         bucketLimit
	groupQuota    quotaLimit
	tools         map[string]*toolPolicy
	failClosed    bool
	toolQuotas    bool // some tool has a quota of its own
	tiers         []tier
	overrides     map[[16]byte]*override
	// identityHeader names the header of an identity that is one lone
	// request-header placeholder, parsed once here rather than on every
	// request; "" for any other identity.
	identityHeader string
	// counted says which quota periods some identity quota of the policy
	// (top level, tier or override) limits: every identity is counted in
	// each, limited or not, so that one moving to a tier or an override
	// that limits a period is held to what it already used in it.
	counted [quota.Month + 1]bool
	dryRun  bool
	redis   *RedisStore
}

// compile validates h and turns it into a policy. Every error names the
// field at fault.
func compile(h *Handler) (*policy, error) {
	p := &policy{
		zone:          h.Zone,
		identity:      h.Identity,
		trustIdentity: h.TrustIdentity,
		reject:        h.RejectStatus,
		knownTTL:      time.Duration(h.KnownTTL),
		maxKnown:      h.MaxKnown,
		maxBody:       h.MaxBody,
		maxBatch:      h.MaxBatch,
		v4:            h.IPv4Prefix,
		v6:            h.IPv6Prefix,
		flush:         time.Duration(h.FlushInterval),
		errorCode:     h.ErrorCode,
		dryRun:        h.DryRun,
	}
	if p.zone == "" {
		p.zone = defaultZone
	}
	if err := checkZone(p.zone); err != nil {
		return nil, err
	}
	if len(p.identity) == 0 {
		p.identity = []string{defaultIdentity}
	}
	if len(p.identity) == 1 {
		p.identityHeader, _ = headerPlaceholder(p.identity[0])
	}
	perCaller := false
	for i, ph := range p.identity {
		if j := slices.IndexFunc(p.identity[:i], func(e string) bool { return samePlaceholder(e, ph) }); j >= 0 {
			return nil, fmt.Errorf("identity %q: reads what %q reads, listed twice, which adds nothing to tell callers apart", ph, p.identity[j])
		}
		if !hasPlaceholder(ph) {
			return nil, fmt.Errorf("identity %q: no placeholder, so every caller would be one identity; use a placeholder such as {http.request.header.Authorization}", ph)
		}
		if key, ok := readsServerSide(ph); ok {
			return nil, fmt.Errorf("identity %q: {%s} reads the server's side of the request or the connection, which a caller may vary (any method token, the protocol or TLS version, the scheme or local address it connects to, a new connection) without changing its credential, so each value would be a fresh identity; leave it out", ph, key)
		}
		if err := oneCallerInput("identity", ph, "one identity", "give each its own identity argument (identity {a} {b}): those values are kept apart"); err != nil {
			return nil, err
		}
		perCaller = perCaller || readsRequest(ph)
	}
	if !perCaller {
		return nil, fmt.Errorf("identity %s: its placeholders read the environment, files, the host or the clock, the same for every caller, so every caller would be one identity; use a placeholder such as {http.request.header.Authorization}",
			strings.Join(p.identity, " "))
	}
	for _, ph := range p.identity {
		if key, ok := readsClock(ph); ok {
			return nil, fmt.Errorf("identity %q: {%s} reads the clock, so each of its values would be a fresh identity with a fresh budget; leave it out", ph, key)
		}
	}
	if len(p.reject) == 0 {
		p.reject = []int{401, 403}
	}
	for i, s := range p.reject {
		if s < 400 || s > 499 {
			return nil, fmt.Errorf("reject_status %d: must be a 4xx status", s)
		}
		if slices.Contains(p.reject[:i], s) {
			return nil, fmt.Errorf("reject_status %d: listed twice", s)
		}
	}
	if err := orDefault("known_ttl", &p.knownTTL, defaultKnownTTL); err != nil {
		return nil, err
	}
	if err := orDefault("max_known", &p.maxKnown, defaultMaxKnown); err != nil {
		return nil, err
	}
	if err := atMostFigure("max_known", p.maxKnown); err != nil {
		return nil, err
	}
	if err := orDefault("max_body", &p.maxBody, defaultMaxBody); err != nil {
		return nil, err
	}
	if p.maxBody > maxMaxBody {
		return nil, fmt.Errorf("max_body %d: at most %d bytes (1GiB)", p.maxBody, maxMaxBody)
	}
	if err := orDefault("max_batch", &p.maxBatch, defaultMaxBatch); err != nil {
		return nil, err
	}
	if err := atMostFigure("max_batch", p.maxBatch); err != nil {
		return nil, err
	}
	if err := orDefault("flush_interval", &p.flush, defaultFlush); err != nil {
		return nil, err
	}
	if p.flush < readTick {
		return nil, fmt.Errorf("flush_interval %v: at least %v, the zone's tick (a flush takes storage locks; 1s to 30s is usual)", p.flush, readTick)
	}
	if err := compilePrefixes(p); err != nil {
		return nil, err
	}
	if err := compileMeter(p, h.Meter); err != nil {
		return nil, err
	}
	if p.errorCode == 0 {
		p.errorCode = defaultErrorCode
	}
	if err := checkErrorCode(p.errorCode); err != nil {
		return nil, err
	}
	switch h.RefuseWith {
	case "", "status":
		p.refuseWith = refuseStatus
	case "jsonrpc":
		p.refuseWith = refuseJSONRPC
	case "tool_result":
		p.refuseWith = refuseToolResult
	default:
		return nil, fmt.Errorf("refuse_with %q: want status, jsonrpc or tool_result", h.RefuseWith)
	}
	var err error
	if p.preauth, p.preauthOff, err = resolveRate(h.Preauth, "1/s", 5); err != nil {
		return nil, fmt.Errorf("preauth: %w", err)
	}
	if p.global, p.globalOff, err = resolveRate(h.Global, "100/s", 200); err != nil {
		return nil, fmt.Errorf("global: %w", err)
	}
	var anonOff bool
	if p.anonymous, anonOff, err = resolveRate(h.Anonymous, "", 0); err != nil {
		return nil, fmt.Errorf("anonymous: %w", err)
	}
	p.anonymousOn = !anonOff
	if err := compileGateways(p, h.Gateways); err != nil {
		return nil, err
	}
	if p.preauthOff && len(p.gateways) > 0 {
		return nil, fmt.Errorf("gateway %v: preauth is off, so no pre-auth budget applies to it or anyone; turn preauth on, or remove the gateway lines", h.Gateways[0].CIDRs)
	}
	if err := compileBase(p, h); err != nil {
		return nil, err
	}
	if err := compileGroup(p, h); err != nil {
		return nil, err
	}
	if err := compileTools(p, h); err != nil {
		return nil, err
	}
	if err := compileTiers(p, h.Tiers); err != nil {
		return nil, err
	}
	p.base.rlPolicy = policyHeader(p.base)
	p.preauthPolicy = []string{string(appendBucketPolicy(nil, "preauth", p.preauth))}
	for i := range p.tiers {
		p.tiers[i].limits.rlPolicy = policyHeader(p.tiers[i].limits)
	}
	if err := compileOverrides(p, h.Overrides); err != nil {
		return nil, err
	}
	p.countPeriods()
	if h.Store != nil && h.Store.Redis != nil {
		if h.Store.Redis.URL == "" {
			return nil, fmt.Errorf("store redis: url is required")
		}
		if u := h.Store.Redis.URL; checkableNow(u) {
			if err := redisstore.CheckURL(u, h.Store.Redis.Cluster); err != nil {
				return nil, fmt.Errorf("store redis: %w", err)
			}
		}
		p.redis = h.Store.Redis
	}
	return p, nil
}

// orDefault refuses a negative *v and replaces 0 (unset) by def.
func orDefault[T ~int | ~int64](name string, v *T, def T) error {
	if *v < 0 {
		return fmt.Errorf("%s: must be positive, got %d", name, *v)
	}
	if *v == 0 {
		*v = def
	}
	return nil
}

func compilePrefixes(p *policy) error {
	if !clientip.ValidPrefix(p.v4, false) {
		return fmt.Errorf("ipv4_prefix %d: out of range 1-32", p.v4)
	}
	if !clientip.ValidPrefix(p.v6, true) {
		return fmt.Errorf("ipv6_prefix %d: out of range 1-128", p.v6)
	}
	if p.v4 == 0 {
		p.v4 = defaultV4Prefix
	}
	if p.v6 == 0 {
		p.v6 = defaultV6Prefix
	}
	return nil
}

func compileGateways(p *policy, gws []Gateway) error {
	seen := map[netip.Prefix]bool{}
	for i, g := range gws {
		if len(g.CIDRs) == 0 {
			return fmt.Errorf("gateway %d: no CIDR", i)
		}
		var gw gateway
		for _, c := range g.CIDRs {
			pfx, err := gatewayPrefix(c)
			if err != nil {
				return fmt.Errorf("gateway %q: %w", c, err)
			}
			if seen[pfx] {
				return fmt.Errorf("gateway %s: listed twice (each network gets one budget)", pfx)
			}
			seen[pfx] = true
			gw.prefixes = append(gw.prefixes, pfx)
		}
		if g.Rate == "" {
			return fmt.Errorf("gateway %v: rate is required", g.CIDRs)
		}
		lim, _, err := resolveRate(&RateLimit{Rate: g.Rate, Burst: g.Burst}, "", 0)
		if err != nil {
			return fmt.Errorf("gateway %v: %w", g.CIDRs, err)
		}
		gw.limit, gw.rlPolicy = lim, []string{string(appendBucketPolicy(nil, "preauth", lim))}
		p.gateways = append(p.gateways, gw)
	}
	return nil
}

func compileBase(p *policy, h *Handler) error {
	var err error
	if p.base.tenant, p.base.tenantOff, err = resolveRate(h.Tenant, "5/s", 20); err != nil {
		return fmt.Errorf("tenant: %w", err)
	}
	if p.base.quota, err = resolveQuota(h.Quota, quotaLimit{day: defaultQuotaDay}); err != nil {
		return fmt.Errorf("quota: %w", err)
	}
	if h.Concurrency != nil {
		if err := checkConcurrency(h.Concurrency); err != nil {
			return err
		}
		if !h.Concurrency.Off {
			p.base.concurrency = *h.Concurrency
		}
	}
	p.base.costs = map[string]int64{}
	for tool, c := range h.Costs {
		if err := checkCost(tool, c); err != nil {
			return err
		}
		p.base.costs[tool] = c
	}
	return nil
}

func checkConcurrency(c *Concurrency) error {
	if c.Max < 0 || c.PerIdentity < 0 {
		return fmt.Errorf("concurrency: must be positive")
	}
	if c.Off && (c.Max > 0 || c.PerIdentity > 0) {
		return fmt.Errorf("concurrency: off sets no cap, and cannot come with max or per_identity")
	}
	if err := atMostFigure("concurrency", c.Max); err != nil {
		return err
	}
	return atMostFigure("concurrency per_identity", c.PerIdentity)
}

// atMostFigure returns an error when the count n of setting name is
// larger than maxFigure: JSON carries numbers as floats, so a larger one
// would not load back as written.
func atMostFigure(name string, n int) error {
	if n > maxFigure {
		return fmt.Errorf("%s %d: at most %d", name, n, maxFigure)
	}
	return nil
}

func compileGroup(p *policy, h *Handler) error {
	gq := givenQuota(h.GroupQuota)
	if h.Group == nil {
		if gq != nil {
			return fmt.Errorf("group_quota requires group")
		}
		return nil
	}
	if h.Group.Key == "" {
		return fmt.Errorf("group: key placeholder is required")
	}
	if key, ok := readsServerSide(h.Group.Key); ok {
		return fmt.Errorf("group key %q: {%s} reads the server's side of the request or the connection, which a caller may vary (a method token, a new connection) without changing its organization, so each value would be a fresh group; leave it out", h.Group.Key, key)
	}
	if err := perCaller("group key", h.Group.Key, "every caller would be in one group", "{http.auth.user.org}"); err != nil {
		return err
	}
	if err := oneCallerInput("group key", h.Group.Key, "one group", "use one placeholder, set by an earlier handler from both if need be"); err != nil {
		return err
	}
	if key, ok := readsClock(h.Group.Key); ok {
		return fmt.Errorf("group key %q: {%s} reads the clock, so each of its values would be a fresh group with a fresh budget; leave it out", h.Group.Key, key)
	}
	if h.Group.Rate == "" {
		return fmt.Errorf("group: rate is required")
	}
	lim, _, err := resolveRate(&RateLimit{Rate: h.Group.Rate, Burst: h.Group.Burst}, "", 0)
	if err != nil {
		return fmt.Errorf("group: %w", err)
	}
	p.groupKey, p.group = h.Group.Key, lim
	if gq != nil {
		if gq.Off {
			return fmt.Errorf("group_quota: off is no group quota; leave group_quota out")
		}
		if p.groupQuota, err = resolveQuota(gq, quotaLimit{}); err != nil {
			return fmt.Errorf("group_quota: %w", err)
		}
	}
	return nil
}

func compileTools(p *policy, h *Handler) error {
	p.tools = map[string]*toolPolicy{}
	for name, t := range h.Tools {
		if err := checkToolName("tool", name); err != nil {
			return err
		}
		if t == nil {
			return fmt.Errorf("tool %s: null sets nothing; give it a cost, a quota, an arg bound or fail_closed", name)
		}
		if t.Cost < 0 || t.Cost > maxFigure {
			return fmt.Errorf("tool %s: cost must be positive, at most %d", name, maxFigure)
		}
		quota := givenQuota(t.Quota)
		if quota != nil && quota.Off {
			return fmt.Errorf("tool %s quota: off is no tool quota; leave quota out", name)
		}
		if t.Cost == 0 && quota == nil && len(t.Args) == 0 && !t.FailClosed {
			return fmt.Errorf("tool %s: sets nothing; give it a cost, a quota, an arg bound or fail_closed", name)
		}
		if t.Cost > 0 {
			if _, dup := h.Costs[name]; dup {
				return fmt.Errorf("tool %s: cost given both as `cost %s` and in the tool block", name, name)
			}
			p.base.costs[name] = t.Cost
		}
		tp := &toolPolicy{failClosed: t.FailClosed}
		if quota != nil {
			q, err := resolveQuota(quota, quotaLimit{})
			if err != nil {
				return fmt.Errorf("tool %s quota: %w", name, err)
			}
			tp.quota = q
		}
		for arg, max := range t.Args {
			if err := checkArgName(name, arg); err != nil {
				return err
			}
			tp.args = append(tp.args, argBound{name: arg, max: max})
		}
		sort.Slice(tp.args, func(i, j int) bool { return tp.args[i].name < tp.args[j].name })
		p.failClosed = p.failClosed || tp.failClosed
		p.toolQuotas = p.toolQuotas || tp.quota.any()
		p.tools[name] = tp
	}
	return nil
}

// compileLimits lays a tier's or an override's limits l over base, the
// limits below them (the top level's, or for an override the tier's). A
// zone-wide concurrency cap l sets replaces base's, but is never above
// server, the top level's: a plan may lower it for its calls, and an
// override take its identity's tier's lower one back up to the server's.
func compileLimits(what string, l *Limits, base limits, server Concurrency) (limits, error) {
	out := base
	g := l.given() // `{}` sets nothing
	l = &g
	if l.Tenant != nil {
		b, off, err := resolveRate(l.Tenant, base.tenant.text, base.tenant.burst)
		if err != nil {
			return out, fmt.Errorf("%s tenant: %w", what, err)
		}
		out.tenant, out.tenantOff = b, off
	}
	if l.Quota != nil {
		q, err := resolveQuota(l.Quota, base.quota)
		if err != nil {
			return out, fmt.Errorf("%s quota: %w", what, err)
		}
		out.quota = q
	}
	if l.Concurrency != nil {
		if err := checkConcurrency(l.Concurrency); err != nil {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		// A plan caps its identities; it may lower the zone-wide cap for
		// its own calls, never raise the server's. Off lifts the caps
		// below it: none for the identity, the server's for the zone.
		c := base.concurrency
		if l.Concurrency.Off {
			c = Concurrency{Max: server.Max}
		}
		if m := l.Concurrency.Max; m > 0 {
			c.Max = m
			if server.Max > 0 && server.Max < m {
				c.Max = server.Max
			}
		}
		if l.Concurrency.PerIdentity > 0 {
			c.PerIdentity = l.Concurrency.PerIdentity
		}
		out.concurrency = c
	}
	if len(l.Costs) > 0 {
		out.costs = make(map[string]int64, len(base.costs)+len(l.Costs))
		for k, v := range base.costs {
			out.costs[k] = v
		}
		for k, v := range l.Costs {
			if err := checkCost(k, v); err != nil {
				return out, fmt.Errorf("%s %w", what, err)
			}
			out.costs[k] = v
		}
	}
	return out, nil
}

func compileTiers(p *policy, tiers []Tier) error {
	seen := map[string]bool{}
	for i, t := range tiers {
		if t.Name == "" {
			return fmt.Errorf("tier %d: name is required", i)
		}
		if seen[t.Name] {
			return fmt.Errorf("tier %s: defined twice", t.Name)
		}
		seen[t.Name] = true
		if err := checkTierMatch(t.Name, t.Match); err != nil {
			return err
		}
		for _, earlier := range p.tiers {
			for _, v := range t.Match.Values {
				if samePlaceholder(earlier.placeholder, t.Match.Placeholder) && slices.Contains(earlier.values, v) {
					return fmt.Errorf("tier %s: match %s %q is tier %s's already, which comes first: this tier would never apply to it", t.Name, t.Match.Placeholder, v, earlier.name)
				}
			}
		}
		if t.Limits.empty() {
			return fmt.Errorf("tier %s: sets no limits", t.Name)
		}
		l, err := compileLimits("tier "+t.Name, &t.Limits, p.base, p.base.concurrency)
		if err != nil {
			return err
		}
		l.tier = t.Name
		p.tiers = append(p.tiers, tier{name: t.Name, placeholder: t.Match.Placeholder, values: t.Match.Values, limits: l})
	}
	return nil
}

func compileOverrides(p *policy, ov map[string]*Limits) error {
	p.overrides = map[[16]byte]*override{}
	for fp, l := range ov {
		key, err := parseFingerprint(fp)
		if err != nil {
			return fmt.Errorf("override %q: %w", fp, err)
		}
		if l == nil || l.empty() {
			return fmt.Errorf("override %s: sets no limits", fp)
		}
		g := l.given()
		o := &override{
			limits: make(map[string]limits, 1+len(p.tiers)), tenant: g.Tenant != nil, quota: g.Quota != nil,
			concurrency: g.Concurrency != nil, costs: l.Costs,
		}
		for _, under := range append([]tier{{limits: p.base}}, p.tiers...) {
			c, err := compileLimits("override "+fp, l, under.limits, p.base.concurrency)
			if err != nil {
				return err
			}
			o.limits[under.name] = c
		}
		p.overrides[key] = o
	}
	return nil
}

// countPeriods sets p.counted from every identity quota of p.
func (p *policy) countPeriods() {
	mark := func(q quotaLimit) {
		p.counted[quota.Day] = p.counted[quota.Day] || q.day > 0
		p.counted[quota.Month] = p.counted[quota.Month] || q.month > 0
	}
	mark(p.base.quota)
	for _, t := range p.tiers {
		mark(t.limits.quota)
	}
	for _, o := range p.overrides {
		for _, l := range o.limits {
			mark(l.quota)
		}
	}
}

// refill returns, over every limit of p for the bucket set of layer l (the
// tenant set's tiers and overrides, the pre-auth set's gateways, the
// shared set's global and anonymous buckets), the longest time one takes
// to fill an empty bucket, the slowest rate and the largest burst: after a
// limit change, a bucket unused since is full by then whatever limit it
// gets, and earns at least that rate up to at most that burst.
func (p *policy) refill(l layer) (bound time.Duration, slowest float64, largest int) {
	lims := p.bucketLimits(l)
	if l == layerTenant {
		for _, o := range p.overrides {
			for _, ol := range o.limits {
				lims = append(lims, ol.tenant)
			}
		}
	}
	for _, b := range lims {
		if b.rate > 0 { // configured rates are; an unset or off layer has none
			bound = max(bound, time.Duration(float64(b.burst)/float64(b.rate)*float64(time.Second)))
			if slowest == 0 || float64(b.rate) < slowest {
				slowest = float64(b.rate)
			}
			largest = max(largest, b.burst)
		}
	}
	return bound, slowest, largest
}

// bucketLimits returns the limits of p for the bucket set of layer l that
// any key may get: for the tenant set, the top-level and the tiers' ones,
// not the overrides', which are their identities' own.
func (p *policy) bucketLimits(l layer) (lims []bucketLimit) {
	switch l {
	case layerPreauth:
		lims = append(lims, p.preauth)
		for _, g := range p.gateways {
			lims = append(lims, g.limit)
		}
	case layerTenant:
		lims = append(lims, p.base.tenant)
		for _, t := range p.tiers {
			lims = append(lims, t.limits.tenant)
		}
	case layerGroup:
		lims = append(lims, p.group)
	case layerGlobal:
		lims = append(lims, p.global)
	case layerAnonymous:
		lims = append(lims, p.anonymous)
	}
	return lims
}

// gatewayPrefix parses a gateway's CIDR or address into the network it
// matches client addresses against.
func gatewayPrefix(c string) (netip.Prefix, error) {
	pfx, err := caddyhttp.CIDRExpressionToPrefix(c)
	if err != nil {
		return pfx, err
	}
	if pfx.Addr().Is4In6() && pfx.Bits() >= 96 { // the client address is unmapped too
		pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
	}
	return pfx.Masked(), nil
}

// gatewayOf returns the gateway, and its listed prefix, that contains
// addr most specifically (the longest prefix wins, as in routing),
// matching the client address itself, never the network its pre-auth key
// stands for.
func gatewayOf(gws []gateway, addr netip.Addr) (*gateway, netip.Prefix, bool) {
	var best *gateway
	var bestPfx netip.Prefix
	for i := range gws {
		for _, p := range gws[i].prefixes {
			if p.Contains(addr) && (best == nil || p.Bits() > bestPfx.Bits()) {
				best, bestPfx = &gws[i], p
			}
		}
	}
	return best, bestPfx, best != nil
}

// parseFingerprint parses 32 lowercase hex characters.
func parseFingerprint(s string) ([16]byte, error) {
	var fp [16]byte
	if len(s) != 32 || strings.ToLower(s) != s {
		return fp, fmt.Errorf("a fingerprint is 32 lowercase hex characters")
	}
	if _, err := hex.Decode(fp[:], []byte(s)); err != nil {
		return fp, fmt.Errorf("a fingerprint is 32 lowercase hex characters: %w", err)
	}
	return fp, nil
}

// checkArgName checks the name of an argument tool bounds: not empty, and
// without a placeholder, which is never replaced (the name is matched
// literally against the call's arguments).
func checkArgName(tool, arg string) error {
	switch {
	case arg == "":
		return fmt.Errorf("tool %s: empty arg name", tool)
	case hasPlaceholder(arg):
		return fmt.Errorf("tool %s: arg %s: an argument name is matched literally, its placeholders are not replaced; name the argument", tool, arg)
	}
	return nil
}

// checkTierMatch checks tier name's match on its own: a placeholder that
// can differ between callers, and values each listed once, without a
// placeholder (a value is compared as written).
func checkTierMatch(name string, m TierMatch) error {
	if m.Placeholder == "" || len(m.Values) == 0 {
		return fmt.Errorf("tier %s: match needs a placeholder and at least one value", name)
	}
	if err := perCaller("tier "+name+": match", m.Placeholder, "the tier would apply to every caller or to none", "{http.auth.user.plan}"); err != nil {
		return err
	}
	for i, v := range m.Values {
		if v == "" {
			return fmt.Errorf("tier %s: match value \"\": a placeholder that is unset or empty selects no tier, so this value would never apply", name)
		}
		if hasPlaceholder(v) {
			return fmt.Errorf("tier %s: match value %s: a value is compared literally, its placeholders are not replaced; write the value (in a Caddyfile, {$VAR} reads an environment variable as it is adapted)", name, v)
		}
		if slices.Contains(m.Values[:i], v) {
			return fmt.Errorf("tier %s: match value %q listed twice", name, v)
		}
	}
	return nil
}

// samePlaceholder reports whether the placeholders a and b read the same
// value: they are equal, or both read one request header, whose name is
// case-insensitive.
func samePlaceholder(a, b string) bool {
	if a == b {
		return true
	}
	ha, okA := headerPlaceholder(a)
	hb, okB := headerPlaceholder(b)
	return okA && okB && strings.EqualFold(ha, hb)
}

// perCaller returns an error when text, the placeholder text of what,
// holds no placeholder or only ones the same for every caller: then
// consequence. example is a placeholder the message suggests.
func perCaller(what, text, consequence, example string) error {
	if !hasPlaceholder(text) {
		return fmt.Errorf("%s %q: no placeholder, so %s; use a placeholder such as %s", what, text, consequence, example)
	}
	if !readsRequest(text) {
		return fmt.Errorf("%s %q: its placeholders read the environment, files, the host, the clock or the server's side of the request, the same for every caller, so %s; use a placeholder such as %s", what, text, consequence, example)
	}
	return nil
}

// globalPlaceholders are the prefixes of Caddy's global placeholders,
// which read the environment, files, the host or the clock: no caller
// chooses them.
var globalPlaceholders = []string{"env.", "file.", "system.", "time."}

// serverSide are the prefixes of the placeholders of the server's side of
// a request: the same for every caller that follows the protocol (an MCP
// client POSTs to one listener), yet a caller may vary them (any method
// token, the protocol version, the scheme and local address of the
// listener it connects to) without changing its credential.
var serverSide = []string{
	"http.request.local", "http.request.scheme", "http.request.proto", "http.request.method", "http.request.orig_method",
	"http.request.duration", "http.shutting_down",
	// The TLS connection's parameters, which the client negotiates (not
	// its certificate, http.request.tls.client.*, a credential), and what
	// differs per connection or per request.
	"http.request.tls.version", "http.request.tls.cipher_suite", "http.request.tls.proto", "http.request.tls.resumed",
	"http.request.tls.server_name", "http.request.remote.port", "http.request.uuid",
}

// serverSideExact are placeholders of the server's side of a request
// that are the prefix of others that are not: {http.request.remote} is
// the address with its port, a new one per connection, while
// {http.request.remote.host} is the address alone.
var serverSideExact = []string{"http.request.remote"}

// hasPrefixIn reports whether key starts with one of prefixes.
func hasPrefixIn(key string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(key, p) })
}

// variesByCaller reports whether the placeholder key reads what a caller
// sends as its own: any that is neither global nor the server's side.
func variesByCaller(key string) bool {
	return !hasPrefixIn(key, globalPlaceholders) && !isServerSide(key)
}

// isServerSide reports whether the placeholder key reads the server's
// side of the request or the connection.
func isServerSide(key string) bool {
	return hasPrefixIn(key, serverSide) || slices.Contains(serverSideExact, key)
}

// readsServerSide returns the first placeholder of text that reads the
// server's side of the request, if any.
func readsServerSide(text string) (string, bool) {
	for key := range placeholderKeys(text) {
		if isServerSide(key) {
			return key, true
		}
	}
	return "", false
}

// readsClock returns the first placeholder of text that reads the clock
// ({time.now.unix}, …), if any: a value that changes by itself.
func readsClock(text string) (string, bool) {
	for key := range placeholderKeys(text) {
		if strings.HasPrefix(key, "time.") {
			return key, true
		}
	}
	return "", false
}

// readsRequest reports whether the text holds a placeholder that may
// differ from one caller to the next.
func readsRequest(text string) bool {
	for key := range placeholderKeys(text) {
		if variesByCaller(key) {
			return true
		}
	}
	return false
}

// oneCallerInput returns an error when text, the placeholder text of what,
// holds two placeholders that a caller may vary (any but the global ones):
// their values run together, so two callers whose values differ only in
// where one ends and the next begins ("x/" and "" against "x" and "/" in
// {A}/{B}) would be one. consequence names what they would share, and
// instead what to write.
func oneCallerInput(what, text, consequence, instead string) error {
	var first string
	for key := range placeholderKeys(text) {
		if hasPrefixIn(key, globalPlaceholders) || key == first {
			continue
		}
		if first == "" {
			first = key
			continue
		}
		return fmt.Errorf("%s %q: {%s} and {%s} in one text run together, so callers whose values differ only in where one ends and the next begins would be %s; %s",
			what, text, first, key, consequence, instead)
	}
	return nil
}

// hasPlaceholder reports whether text holds a placeholder.
func hasPlaceholder(text string) bool {
	for range placeholderKeys(text) {
		return true
	}
	return false
}

// placeholderKeys yields the keys of text's placeholders as Caddy's
// replacer finds them: a brace escaped with a backslash (\{) opens none,
// and an escaped closing brace closes none unless it ends the text.
func placeholderKeys(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
	scan:
		for i := 0; i < len(text); i++ {
			if text[i] != '{' || i > 0 && text[i-1] == '\\' {
				continue
			}
			end := strings.IndexByte(text[i:], '}') + i
			if end < i {
				return
			}
			for end < len(text)-1 && text[end-1] == '\\' {
				next := strings.IndexByte(text[end+1:], '}')
				if next < 0 {
					continue scan
				}
				end += next + 1
			}
			if !yield(text[i+1 : end]) {
				return
			}
			i = end
		}
	}
}
