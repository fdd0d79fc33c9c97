package mcplimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/time/rate"
)

// RateLimit configures one token bucket. A zero value inherits the
// layer's default; Off disables the layer.
type RateLimit struct {
	// Rate is the refill rate as `<n>/<s|m|h>`, e.g. `5/s` or `300/m`
	// (the unit may be spelled `sec`, `second`, `min`, `minute`, `hr` or
	// `hour`: `20/min` is `20/m`); <n> is at most 999999999999999 (15
	// digits). Default: the layer's default (pre-auth 1/s, tenant 5/s, global
	// 100/s; anonymous has none, so it needs a Rate); in a tier or an
	// override, the tenant rate otherwise in force for the identity (its
	// tier's, else the top-level one).
	Rate string `json:"rate,omitempty"`

	// Burst is the bucket size in tokens (the most a caller can spend at
	// once). Default: the layer's default burst when Rate is also unset,
	// otherwise the `<n>` of Rate (so `20/m` allows 20 at once). At most
	// 999999999999999 (15 digits, the largest RateLimit header value).
	Burst int `json:"burst,omitempty"`

	// Off disables the layer. It cannot be combined with Rate or Burst.
	// The layer's buckets are kept as they are meanwhile, earning the
	// rate they had: turned on again with the same limits, a layer hands
	// no one a fresh burst.
	Off bool `json:"off,omitempty"`
}

// QuotaLimit configures counts per UTC period. Zero fields are unset, and
// a QuotaLimit that sets none (`{}`) is one left out.
type QuotaLimit struct {
	// Day is the number of metered units allowed per UTC day (resets at
	// 00:00 UTC). The top-level `quota` field, when absent or empty, is
	// 5000 per day; an empty group or tool quota is none. At most
	// 999999999999999 (15 digits), as Month.
	Day int64 `json:"day,omitempty"`

	// Month is the number of metered units allowed per UTC calendar month
	// (resets on the 1st at 00:00 UTC). At most 999999999999999.
	Month int64 `json:"month,omitempty"`

	// Off disables the quota. It cannot be combined with Day or Month.
	Off bool `json:"off,omitempty"`
}

// Concurrency caps metered calls in flight. A batch takes one slot per
// metered call, since backends may run its calls at once.
type Concurrency struct {
	// Max is the most metered calls in flight for the whole zone on this
	// instance. 0 means no zone-wide cap; at most 999999999999999.
	Max int `json:"max,omitempty"`

	// PerIdentity is the most metered calls in flight for one identity,
	// proven or not; requests without an identity are covered by Max only.
	// 0 means no per-identity cap; at most 999999999999999. A cap above
	// the zone-wide one in force never binds, and is warned about at start.
	PerIdentity int `json:"per_identity,omitempty"`

	// Off says there is no cap, as when the layer is left out. In a tier
	// or an override, it lifts the caps of the limits below it for the
	// identities it covers: no per-identity cap, and the zone-wide cap is
	// the top level's. It cannot be combined with Max or PerIdentity.
	Off bool `json:"off,omitempty"`
}

// Gateway gives addresses that front many tenants a larger pre-auth
// budget (still a bounded one, per address).
type Gateway struct {
	// CIDRs lists the gateway networks, e.g. `10.0.0.0/8` or `192.0.2.7/32`.
	// A network may be listed once over all gateways; an address in
	// several listed networks gets the budget of the most specific one.
	CIDRs []string `json:"cidrs,omitempty"`

	// Rate is the pre-auth rate for these addresses, `<n>/<s|m|h>`.
	Rate string `json:"rate,omitempty"`

	// Burst is the pre-auth bucket size for these addresses.
	// Default: the `<n>` of Rate.
	Burst int `json:"burst,omitempty"`
}

// Group configures a tenant-wide layer keyed by a second identity,
// such as the organization an authentication handler sets.
type Group struct {
	// Key is the placeholder whose value names the group, e.g.
	// `{http.auth.user.org}`; it must hold a placeholder that can differ
	// between callers (not only `{env.*}` and the like), and at most one
	// such placeholder, whose value cannot run into another's; the clock
	// ({time.*}) is refused in it, as each value would be a fresh group. An empty
	// value skips the group layer. A placeholder that is none of Caddy's
	// own is warned about at the first request for which no earlier
	// handler (a map, a plugin) set it: it is empty then.
	Key string `json:"key,omitempty"`

	// Rate is the group's refill rate, `<n>/<s|m|h>`. Required.
	Rate string `json:"rate,omitempty"`

	// Burst is the group's bucket size. Default: the `<n>` of Rate.
	Burst int `json:"burst,omitempty"`
}

// ToolPolicy is one tool's policy.
type ToolPolicy struct {
	// Cost is what one call of this tool costs, in tokens and quota units.
	// Default: 1.
	Cost int64 `json:"cost,omitempty"`

	// Quota is a per-identity, per-tool count, checked in addition to
	// the shared quotas. Refusals carry `data.limit` `tool_quota`. Off is
	// refused: leave the field out for no tool quota.
	Quota *QuotaLimit `json:"quota,omitempty"`

	// Args bounds numeric arguments: a call whose
	// `params.arguments.<name>` is present, not null, and either exceeds
	// the bound or is not a number gets HTTP 400 with JSON-RPC -32602.
	// Values compare as doubles, as JavaScript reads them, however long
	// they are written; an integer without fraction or exponent compares
	// exactly, as Python and Go integer fields read it. A bound is itself
	// a double: past 2^53 it is in force as the nearest one. A name is
	// matched literally: one holding a placeholder is refused.
	Args ArgBounds `json:"args,omitempty"`

	// FailClosed refuses calls of this tool with HTTP 503
	// (`STORE_UNAVAILABLE`) while the quota store is degraded, with a
	// Retry-After of the time until the store may be back (Redis's next
	// probe, or the next flush to storage).
	FailClosed bool `json:"fail_closed,omitempty"`
}

// Limits are the limits a tier or an override sets; what it leaves
// unset falls back to the top-level values (for an override, to those of
// its identity's tier). A field given empty (`{}`) sets nothing, as an
// omitted one; limits that set nothing are a configuration error.
type Limits struct {
	// Tenant replaces the per-identity bucket.
	Tenant *RateLimit `json:"tenant,omitempty"`

	// Quota replaces the per-identity quota (all of its periods).
	Quota *QuotaLimit `json:"quota,omitempty"`

	// Concurrency sets the identity's cap (`per_identity`), and may lower
	// (never raise) the zone-wide cap (`max`) for the calls it covers:
	// they are refused once the zone has that many in flight, so a plan
	// can be shed first under load. An override's `max` replaces its
	// identity's tier's, up to the top level's. What it leaves at 0 comes
	// from the limits below it; `off` lifts their caps for the identities
	// it covers (see Concurrency.Off). In the Caddyfile, a lone number
	// inside a tier or an override (`concurrency 2`) is the identity's cap.
	Concurrency *Concurrency `json:"concurrency,omitempty"`

	// Costs replaces per-tool costs for the named tools.
	Costs Costs `json:"costs,omitempty"`
}

// empty reports whether l sets no limits (see given).
func (l *Limits) empty() bool {
	g := l.given()
	return g.Tenant == nil && g.Quota == nil && g.Concurrency == nil && len(g.Costs) == 0
}

// given returns the limits l sets: a field at its zero value (`{}` in
// JSON) sets nothing, as an omitted one, since each of its zero fields
// means the default.
func (l *Limits) given() Limits {
	g := *l
	if g.Tenant != nil && *g.Tenant == (RateLimit{}) {
		g.Tenant = nil
	}
	g.Quota = givenQuota(g.Quota)
	if g.Concurrency != nil && *g.Concurrency == (Concurrency{}) {
		g.Concurrency = nil
	}
	return g
}

// TierMatch selects a tier by a placeholder's value.
type TierMatch struct {
	// Placeholder is evaluated per request, e.g. `{http.auth.user.plan}`;
	// it must hold a placeholder that can differ between callers. It
	// should come from a trusted earlier handler: a raw client header lets
	// the client pick its own plan. A placeholder that is none of Caddy's
	// own (Caddyfile shorthand such as {header.X} in JSON, or a map's
	// destination) is warned about at the first request for which no
	// earlier handler (a map, a plugin) set it: the tier does not apply
	// to such requests.
	Placeholder string `json:"placeholder,omitempty"`

	// Values lists the values that select this tier (exact match); a value
	// an earlier tier with the same placeholder lists (a request header's
	// name spelt in any case is the same) is refused, as this
	// tier would never apply to it, and so is an empty value: an unset or
	// empty placeholder selects no tier. A value is compared as written: one
	// holding a placeholder is refused.
	Values []string `json:"values,omitempty"`
}

// Tier is one plan: the first tier whose match succeeds replaces the
// limits it sets for the request's identity.
type Tier struct {
	// Name names the tier in logs and the admin API. Required, and
	// unique within a handler.
	Name string `json:"name,omitempty"`

	// Match selects the requests this tier applies to.
	Match TierMatch `json:"match"`

	// Limits are the tier's limits (`tenant`, `quota`, `concurrency`,
	// `costs`), inline; what the tier leaves unset falls back to the
	// top-level values.
	Limits
}

// Store selects where shared limits are decided.
type Store struct {
	// Redis decides the tenant, group and global buckets and every quota
	// (identity, group, tool) in Redis, atomically per request; pre-auth
	// stays local, and so does an unproven caller's global charge, so that
	// a scanner costs no round trip.
	Redis *RedisStore `json:"redis,omitempty"`
}

// RedisStore configures the Redis store.
type RedisStore struct {
	// URL is `redis://[:password@]host:port[/db]` or `rediss://…` (a DB
	// in the path and a `db` parameter beside it is refused, and so is any
	// parameter given twice); placeholders such as `{env.REDIS_URL}` are
	// expanded at provision time, and a URL holding one is checked then,
	// once expanded (not by `caddy adapt`): one that expands to nothing,
	// where go-redis would dial its default host or port, is refused.
	URL string `json:"url,omitempty"`

	// Cluster treats URL as one node of a Redis Cluster: the store learns
	// the cluster from it (and from further nodes given as
	// `?addr=host:port`, repeated, for when that one is down) and sends
	// each zone's calls to the master of the zone's hash slot, following
	// the slot when it moves or its master fails over. The URL then
	// names no DB (a cluster has DB 0 alone).
	Cluster bool `json:"cluster,omitempty"`

	// Timeout bounds one round trip; past it the request is decided
	// locally (fail open). Waiting for a free pooled connection
	// (`?pool_size=N` in the URL, 10 per CPU by default) is not part of it:
	// calls queue for one up to 1s. It also bounds how long a zone
	// starting with the store (or gaining it on a reload) waits for
	// Redis's fingerprint key, the scripts' loading and a ping before it
	// starts degraded, though never less than 250ms. Default: 50ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// maxFigure bounds rates, bursts and quotas: the largest Integer of
// structured fields (RFC 8941, 15 digits), so the RateLimit headers can
// state every limit, and JSON numbers carry it exactly.
const maxFigure = 999_999_999_999_999

// maxZoneName bounds a zone's name, in bytes: it names files on the host
// (in hex, with more around it), whose names the file system bounds.
const maxZoneName = 64

// checkZone checks a zone's name: one directory of the storage, its own,
// and one hash tag of its Redis keys.
func checkZone(zone string) error {
	switch {
	case strings.ContainsAny(zone, "/\\ \t\n"):
		return fmt.Errorf("zone %q: must not contain slashes or spaces", zone)
	case !utf8.ValidString(zone) || strings.ContainsFunc(zone, unseen):
		// It names storage keys and files, and labels metrics: two
		// names must not look alike. U+FFFD is what the Caddyfile's
		// and JSON's readers make of any byte that is not UTF-8, so two
		// names written with different such bytes would be one zone.
		return fmt.Errorf("zone %q: must be UTF-8 text without spaces, control or invisible characters", zone)
	case zone == "." || zone == "..":
		return fmt.Errorf("zone %q: names a directory of the storage, not a zone's own", zone)
	case strings.ContainsAny(zone, "{}"):
		// Its Redis keys are mcprl:{<zone>}:…, the zone a Redis Cluster
		// hash tag: a brace would end the tag early (`}a` leaves it empty,
		// and each key on a slot of its own) or make two zones one tag.
		return fmt.Errorf("zone %q: must not contain braces (it is the hash tag of its Redis keys)", zone)
	case len(zone) > maxZoneName:
		return fmt.Errorf("zone %q: at most %d bytes long (it names files on the host)", zone, maxZoneName)
	}
	return nil
}

// unseen reports whether r is a space, an invisible character or U+FFFD,
// what the Caddyfile's and JSON's readers make of a byte that is not
// UTF-8: what a name shown in a log or a label must not hold.
func unseen(r rune) bool {
	return unicode.IsSpace(r) || !unicode.IsGraphic(r) || r == utf8.RuneError
}

// checkErrorCode checks error_code: outside the codes JSON-RPC and MCP
// reserve, and a number every JSON reader carries exactly.
func checkErrorCode(code int) error {
	switch {
	case code >= -32768 && code <= -32000:
		return fmt.Errorf("error_code %d: must lie outside -32768…-32000 (reserved by JSON-RPC and MCP)", code)
	case code < -maxFigure || code > maxFigure:
		return fmt.Errorf("error_code %d: at most %d digits", code, len(strconv.Itoa(maxFigure)))
	}
	return nil
}

// checkCost checks the cost of a tool: a named tool (see checkToolName),
// a positive cost, at most maxFigure.
func checkCost(tool string, n int64) error {
	if err := checkToolName("cost", tool); err != nil {
		return err
	}
	if n <= 0 || n > maxFigure {
		return fmt.Errorf("cost %s: must be a positive integer, at most %d, got %d", tool, maxFigure, n)
	}
	return nil
}

// checkToolName checks the tool name of a setting (what): not empty, and
// not written as a pattern. A tool name is matched literally: * is no
// wildcard (MCP's tool names hold letters, digits, _, - and . only), and
// a placeholder is never replaced, so either would name a tool no caller
// calls.
func checkToolName(what, tool string) error {
	switch {
	case tool == "":
		return fmt.Errorf("%s: empty tool name", what)
	case tool == "*":
		return fmt.Errorf("%s *: a tool name is matched literally, * is no wildcard; name each tool (every call costs at least 1)", what)
	case hasPlaceholder(tool):
		return fmt.Errorf("%s %s: a tool name is matched literally, its placeholders are not replaced; name the tool", what, tool)
	}
	return nil
}

// parseRate parses `<n>/<s|m|h>`.
func parseRate(s string) (rate.Limit, int, error) {
	num, unit, ok := strings.Cut(s, "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: want <n>/<s|m|h>", s)
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || n > maxFigure || num[0] == '+' { // messages quote the rate as written
		return 0, 0, fmt.Errorf("rate %q: <n> must be a positive integer, at most %d", s, maxFigure)
	}
	per := rateUnit(unit)
	if per == 0 {
		return 0, 0, fmt.Errorf("rate %q: unit must be s, m or h (or sec, min, hour)", s)
	}
	return rate.Limit(float64(n) / per.Seconds()), n, nil
}

// rateUnit returns the period of a rate's unit, or 0 for none: s, m and h
// as the Caddyfile's grammar writes them, and the spellings an operator
// also writes (20/min, as SPEC's plans do).
func rateUnit(unit string) time.Duration {
	switch unit {
	case "s", "sec", "second":
		return time.Second
	case "m", "min", "minute":
		return time.Minute
	case "h", "hr", "hour":
		return time.Hour
	}
	return 0
}

// bucketLimit is a resolved token bucket.
type bucketLimit struct {
	rate  rate.Limit
	burst int
	text  string // as configured, e.g. "5/s"
}

// unitWord names a rate's unit for refusal messages.
func (b bucketLimit) unitWord() string {
	_, unit, _ := strings.Cut(b.text, "/")
	switch rateUnit(unit) {
	case time.Minute:
		return "per-minute"
	case time.Hour:
		return "per-hour"
	}
	return "per-second"
}

// resolveRate turns a RateLimit into a bucket. off is true when the
// layer is disabled.
func resolveRate(rl *RateLimit, defRate string, defBurst int) (b bucketLimit, off bool, err error) {
	text, burst := defRate, defBurst
	if rl != nil {
		if rl.Off {
			if rl.Rate != "" || rl.Burst != 0 {
				return b, false, fmt.Errorf("off together with a rate or burst: say one")
			}
			return b, true, nil
		}
		if rl.Burst < 0 || rl.Burst > maxFigure {
			return b, false, fmt.Errorf("burst %d: must be positive and at most %d", rl.Burst, maxFigure)
		}
		if rl.Rate != "" {
			text, burst = rl.Rate, 0
		}
		if rl.Burst > 0 {
			burst = rl.Burst
		}
	}
	if text == "" {
		if rl != nil && rl.Burst > 0 {
			return b, false, fmt.Errorf("burst %d without a rate: rate is required (the layer has no default)", rl.Burst)
		}
		return b, true, nil
	}
	r, n, err := parseRate(text)
	if err != nil {
		return b, false, err
	}
	if burst == 0 {
		burst = n
	}
	return bucketLimit{rate: r, burst: burst, text: text}, false, nil
}

// givenQuota returns q, or nil when q sets nothing: a quota given as `{}`
// in JSON (or with only zero fields, each of which means its default) is
// one left out, as a layer's empty rate limit is.
func givenQuota(q *QuotaLimit) *QuotaLimit {
	if q != nil && *q == (QuotaLimit{}) {
		return nil
	}
	return q
}

// quotaLimit is a resolved quota: 0 means no limit for that period.
type quotaLimit struct {
	day, month int64
}

func (q quotaLimit) any() bool { return q.day > 0 || q.month > 0 }

func resolveQuota(ql *QuotaLimit, def quotaLimit) (quotaLimit, error) {
	if ql = givenQuota(ql); ql == nil {
		return def, nil
	}
	if ql.Off {
		if ql.Day != 0 || ql.Month != 0 {
			return quotaLimit{}, fmt.Errorf("off together with a day or month count: say one")
		}
		return quotaLimit{}, nil
	}
	if ql.Day < 0 || ql.Month < 0 || ql.Day > maxFigure || ql.Month > maxFigure {
		return quotaLimit{}, fmt.Errorf("quota must be positive and at most %d", maxFigure)
	}
	if ql.Day == 0 && ql.Month == 0 {
		return quotaLimit{}, fmt.Errorf("quota sets neither day nor month")
	}
	return quotaLimit{day: ql.Day, month: ql.Month}, nil
}

// ceilSeconds converts a wait into a Retry-After value: whole seconds,
// at least 1, never earlier than the real wait.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return max(s, 1)
}
