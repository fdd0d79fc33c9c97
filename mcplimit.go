// Package mcplimit is a Caddy HTTP handler that rate-limits MCP traffic
// (JSON-RPC 2.0 over Streamable HTTP and the legacy HTTP+SSE transport)
// before it reaches the MCP server behind `reverse_proxy`.
package mcplimit

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler decides, before anything reaches the backend, whether a request
// may spend the backend's capacity. It resolves the client address through
// Caddy's trusted-proxy logic, charges callers whose credential the backend
// has not yet accepted to a per-address pre-auth bucket, reads the JSON-RPC
// body to learn what the request costs (only `tools/call` by default), and
// then admits it through the tenant, group, quota, global, anonymous and
// concurrency layers, all or nothing.
//
// A refused request never reaches the next handler. The caller sees HTTP
// 429 (503 while a fail-closed tool cannot be counted; 400/413/415 for
// malformed bodies) with `Retry-After`, `Cache-Control: no-store` and a
// JSON-RPC error whose `data` names the layer, a machine-readable code and
// the wait, echoing each request id.
type Handler struct {
	// Zone names the state this handler shares: every handler with the same
	// zone shares buckets, the known-good set and quota counts, across
	// routes and across config reloads. Each handler decides with its own
	// settings; the zone-wide ones (flush_interval, store) must be the same
	// in every handler of the zone in one config (a reload may change
	// them), known_ttl and max_known are the largest of its handlers'. A
	// zone a config load leaves unused keeps its buckets, calls in flight
	// and metrics for a later load that names it again on the same storage
	// and fingerprint key, until its buckets would have refilled (at most
	// 24h) and its calls have ended. At most 64 bytes of UTF-8, without
	// slashes, spaces (Unicode ones included), control or invisible
	// characters, or braces (the name is its Redis keys' hash tag).
	// Default: "default" (the Caddyfile refuses an empty name).
	Zone string `json:"zone,omitempty"`

	// Identity lists the placeholders whose values, joined with newlines,
	// identify the caller. Only a keyed fingerprint of the value is kept.
	// An Authorization or Proxy-Authorization value is read as backends
	// read it: its scheme in any case (letters that fold to ASCII ones, as
	// ſ to s, included) and any whitespace are one identity; the scheme
	// word itself is part of the identity.
	// A request carrying an identity header twice, Bearer or Basic
	// credentials with more than one token, or an identity header that its
	// Connection header names (a proxy would drop it), is refused with 400.
	// A hop-by-hop identity header (Proxy-Authorization) is warned about at
	// start unless trust_identity is set. An identity query parameter or
	// cookie sent twice under any spelling some backend reads, or only under
	// a spelling Caddy's placeholder does not read, is refused with 400 too;
	// a cookie's value is read as backends read it (trimmed, cut at a space,
	// ',', '[' or ']', %-decoded, '+' as a space), and any other identity
	// header or query parameter is trimmed of the whitespace backends trim
	// (Unicode spaces, 0x85, 0xA0, controls below the space, U+FEFF), so
	// one of whitespace alone is none, and a Bearer or Basic scheme
	// without a token is none either. A
	// placeholder with text around it whose placeholders are all empty
	// (`key:{http.request.header.X-Api-Key}` without the header) is no
	// identity either; Caddy's global placeholders ({env.*}, {system.*})
	// do not count there. One entry holds at most one placeholder a caller
	// may vary (values in one text run together, so two callers could be
	// one identity): list each as its own entry, and each once. The server's side of the
	// request and the connection ({http.request.method}, .proto, .scheme,
	// .local*, .remote with its port, .uuid) is refused: a caller varies
	// it at will; so is the clock ({time.*}), beside a credential too. One read from a value an earlier handler
	// derived ({http.vars.*}) is warned about at start; one that is none
	// of Caddy's own ({method}: in JSON, placeholders have their full
	// names) at the first request for which no earlier handler (a map, a
	// plugin) set it, since it is then empty; and at start, one that
	// reads a whole input carrying several values (the query,
	// the Cookie header), where a throwaway parameter makes a new identity,
	// and one joining several inputs the client sends (a header and a
	// query parameter), where a backend reading only one proves every
	// variant of the others.
	// At least one placeholder
	// must read something the caller chooses: one made only of {env.*},
	// {file.*}, {system.*}, {time.*} or the server's side of the request is
	// a config error.
	// Default: ["{http.request.header.Authorization}"].
	Identity []string `json:"identity,omitempty"`

	// TrustIdentity means the identity placeholders are set by an earlier
	// authentication handler, so a non-empty identity is proven on sight.
	// Set with an input only the client writes (Authorization or
	// Proxy-Authorization, the Cookie header or a cookie, any part of the
	// URI), it is warned about at start.
	TrustIdentity bool `json:"trust_identity,omitempty"`

	// RejectStatus lists the backend statuses that make a proven identity
	// forgotten (5xx never do). Default: [401, 403].
	RejectStatus []int `json:"reject_status,omitempty"`

	// KnownTTL is how long a proven identity stays proven after its last
	// use. Proven identities are saved to storage at the flush after one
	// is proven or forgotten; last uses alone every 24th of KnownTTL, so a
	// restart may expire an identity up to that much early. A zone keeps
	// identities for the largest KnownTTL of its handlers. An identity
	// forgotten, expired or evicted is charged as one proven before (to its
	// tenant bucket and quotas) for KnownTTL, or until a tenant bucket it
	// drained would have refilled when that is longer, and so is an
	// unproven one from a call of it the backend answered with a 2xx that
	// proves nothing, or that was given up with no status after its
	// client left. A forget stays in
	// the saved set for KnownTTL and at least 24h; instances sharing a zone
	// should run one KnownTTL, as each save drops the saved identities
	// last used longer ago than its own. Default: 24h.
	KnownTTL caddy.Duration `json:"known_ttl,omitempty"`

	// MaxKnown caps the proven identities kept in the zone (least recently
	// used are dropped beyond it, never below), and the forgotten ones it
	// remembers; each bucket set (pre-auth, tenant, group) holds twice
	// it, and at least 1024 buckets, so that the drained buckets of the
	// identities it drops never hold back those it keeps. A zone applies the largest MaxKnown of the handlers
	// holding it: a lower value applies once the config that lowers it is
	// in force and the old one has let go, never for a rejected load.
	// At most 999999999999999. Default: 100000.
	MaxKnown int `json:"max_known,omitempty"`

	// Meter lists the JSON-RPC methods that cost, case-sensitively; `*`
	// makes every request cost 1. A name that is not an MCP method but a
	// close misspelling of a client's (tools/cal, TOOLS/CALL) is refused,
	// and so are "off" and names holding a space or an invisible
	// character; other names MCP does not define for a client are metered
	// as written, warned about at start. A method listed twice is refused.
	// A list without tools/call leaves
	// tool costs, tool quotas and fail_closed without effect (warned about
	// at start; arg bounds still refuse). Default: ["tools/call"].
	Meter []string `json:"meter,omitempty"`

	// Costs maps a tool name (matched byte for byte with the call's
	// params.name, or the first element of params given by position) to
	// the cost of one `tools/call` of it, in tokens and quota units: a
	// positive integer of at most 15 digits (null is refused). Names are
	// literal: `*` and a name holding a placeholder are refused. Default
	// cost: 1.
	Costs Costs `json:"costs,omitempty"`

	// MaxBody is the largest request body read on a metered route, in
	// bytes; larger bodies get 413 (over HTTP/1, the rest of such a body
	// is then read and dropped, for at most 2s and 64 MiB, and the
	// connection closes). At most 1073741824 (1GiB). Default: 1048576
	// (1MiB).
	MaxBody int64 `json:"max_body,omitempty"`

	// MaxBatch is the most entries a JSON-RPC batch may have; more get 400.
	// At most 999999999999999. Default: 32.
	MaxBatch int `json:"max_batch,omitempty"`

	// Preauth is the per-client-address bucket charged by every request
	// whose identity is not proven. With the bucket empty, a request that
	// no wait lets pass as far as is read of it (a content coding or
	// charset, a length over max_body, two credentials, a protocol
	// upgrade, a batch over max_batch, an arg bound exceeded) gets that
	// refusal instead of the wait. Default: 1/s, burst 5.
	Preauth *RateLimit `json:"preauth,omitempty"`

	// Gateways give listed addresses a larger pre-auth budget. A client is
	// matched by its own address, against the most specific network listed
	// (each network may be listed once); a gateway listed narrower than
	// the pre-auth key's network (ipv4_prefix, ipv6_prefix) is its own
	// key, a wider one is keyed like any client. Refused with preauth off,
	// where no pre-auth budget applies.
	Gateways []Gateway `json:"gateways,omitempty"`

	// Tenant is the per-proven-identity bucket. An identity forgotten
	// while its bucket is still held (a drained one is kept until it
	// refills) is charged to it too. Default: 5/s, burst 20.
	Tenant *RateLimit `json:"tenant,omitempty"`

	// Quota is the per-proven-identity count per UTC day and/or month,
	// shared across instances through Caddy's storage. The call whose 2xx
	// proves an identity is counted in it too. Default: 5000/day.
	Quota *QuotaLimit `json:"quota,omitempty"`

	// Global is one bucket for the whole zone on this instance; with
	// `store redis`, one for all instances for proven identities' calls,
	// while an unproven caller's request takes from the instance's own.
	// Default: 100/s, burst 200.
	Global *RateLimit `json:"global,omitempty"`

	// Anonymous is a shared bucket for requests that carry no identity at
	// all, metered or not: each costs it 1, or its metered cost if larger.
	// Default: off.
	Anonymous *RateLimit `json:"anonymous,omitempty"`

	// Concurrency caps metered calls in flight. A call is in flight until
	// the backend has written its answer: for a request other than a POST,
	// the start of its answer (a GET's stream is a listen stream); on a
	// POST's SSE answer, a JSON-RPC response to every request of the POST;
	// otherwise, the end of the response. A call whose client hung up
	// stays in flight while the backend still runs it, at most one
	// minute; once answered, its request ends with its client.
	// Default: off (`concurrency off`, `{"off": true}`, says so too).
	Concurrency *Concurrency `json:"concurrency,omitempty"`

	// IPv4Prefix is the prefix length that keys IPv4 client addresses.
	// Default: 32.
	IPv4Prefix int `json:"ipv4_prefix,omitempty"`

	// IPv6Prefix is the prefix length that keys IPv6 client addresses, so
	// one host owning a /64 cannot mint 2^64 budgets. Default: 64.
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`

	// FlushInterval is how often quota counts are pushed to and read from
	// Caddy's storage (and changes to the proven identities saved). A
	// flush waits for a storage lock at most this long (2s to 10s). It is
	// the zone's: every handler of the zone in one config sets the same.
	// At least 100ms. Default: 30s.
	FlushInterval caddy.Duration `json:"flush_interval,omitempty"`

	// ErrorCode is the JSON-RPC error code of refusals, the body rules'
	// (413, 415, 408, 400) included; only an argument over its `arg`
	// bound is answered with JSON-RPC's -32602 (invalid params). It must
	// lie outside -32768…-32000, and have at most 15 digits. Default:
	// -31004.
	ErrorCode int `json:"error_code,omitempty"`

	// RefuseWith is how refusals are answered: `status` (HTTP 429/503 with
	// a JSON-RPC error), `jsonrpc` (HTTP 200 with the same error) or
	// `tool_result` (HTTP 200; a refused tools/call gets an `isError` tool
	// result; one whose id JSON-RPC does not allow gets the error, which
	// alone may carry id null). Legacy HTTP+SSE POSTs and GETs are always
	// answered as `status`.
	// Default: status.
	RefuseWith string `json:"refuse_with,omitempty"`

	// Group is an organization-wide layer checked right after the tenant
	// layer.
	Group *Group `json:"group,omitempty"`

	// GroupQuota is the group's count per UTC day and/or month. Requires
	// Group. Off is refused: leave the field out for no group quota.
	GroupQuota *QuotaLimit `json:"group_quota,omitempty"`

	// Tools holds per-tool policies keyed by tool name, matched byte for
	// byte with the call's params.name (or the first element of params
	// given by position); `*` and a name holding a placeholder are
	// refused. Each must set something: an empty or null policy is a
	// config error.
	Tools map[string]*ToolPolicy `json:"tools,omitempty"`

	// Store selects an external store for exact shared limits. Adding it
	// to a running zone carries the period's quota counts to it; bucket
	// levels are not carried, and removing it leaves the counts made in
	// it behind. It is the zone's: every handler of the zone in one config
	// sets the same store, as it runs (the URL as go-redis reads it once
	// its placeholders expand, a timeout left out as its default).
	Store *Store `json:"store,omitempty"`

	// Tiers are plans, tried in order; the first match applies.
	Tiers []Tier `json:"tiers,omitempty"`

	// Overrides maps an identity fingerprint (32 lowercase hex characters)
	// to its own limits, which take precedence over tiers. What an override
	// leaves unset comes from the identity's tier, then the top level.
	Overrides map[string]*Limits `json:"overrides,omitempty"`

	// DryRun decides as usual but admits refused requests, logging them
	// marked `dry_run` and counting them, once per layer and request, in
	// `mcp_ratelimit_dry_run_refusals_total`. A request some layer would
	// refuse takes nothing from any layer, as enforcement would have
	// refused it whole, so every layer stands where enforcement would
	// leave it. `max_batch` and `arg` bounds are recorded the same way; a
	// body that cannot be read (over `max_body`, encoded, not UTF-8) or a
	// repeated identity input is still refused.
	DryRun bool `json:"dry_run,omitempty"`

	pol    *policy
	zone   *zone
	logger *zap.Logger
	use    *handlerUse
	// forwarded holds the zone's forwardedState for this handler's
	// server, once a request has carried X-Forwarded-For.
	forwarded *atomic.Pointer[forwardedState]
	// unset watches the placeholders that are none of Caddy's own.
	unset []*unsetWatch
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mcp_ratelimit",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision compiles the configuration and attaches the handler to its
// zone, creating the zone on first use.
func (h *Handler) Provision(ctx caddy.Context) error {
	if caddy.Exiting() {
		// Caddy's admin API still loads a config while a stop waits for
		// the running one's calls; that config is never stopped, so what
		// it counts would never be flushed.
		return errors.New("caddy is exiting: a config loaded now would never be stopped, and what it counts would never be saved; load it once Caddy has started again")
	}
	h.logger = ctx.Logger()
	pol, err := compile(h)
	if err != nil {
		return err
	}
	warnHopByHopIdentity(pol, h.logger)
	warnTrustedClientInput(pol, h.logger)
	warnDerivedIdentity(pol, h.logger)
	warnWholeInputIdentity(pol, h.logger)
	warnSeveralInputsIdentity(pol, h.logger)
	warnUnpayableCosts(pol, h.logger)
	warnUnmeteredToolPolicies(pol, h.logger)
	warnUnknownMethods(pol, h.logger)
	warnPerIdentityAboveMax(pol, h.logger)
	if pol.redis != nil {
		if err := checkRedisStore(pol.redis, pol.zone); err != nil {
			return err
		}
	}
	h.pol = pol
	z, err := acquireZone(ctx.Storage(), ctx.GetMetricsRegistry(), pol, h.logger)
	if err != nil {
		return fmt.Errorf("zone %q: %w", pol.zone, err)
	}
	h.zone = z
	h.use = &handlerUse{letGo: h.letGo, ended: h.zone.hintFlush}
	h.forwarded = new(atomic.Pointer[forwardedState])
	h.unset = unsetWatches(pol)
	if srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server); srv != nil {
		h.noteServer(srv)
	}
	return nil
}

// Validate refuses configurations that cannot work.
func (h *Handler) Validate() error {
	if h.pol != nil {
		return nil
	}
	_, err := compile(h)
	return err
}

// Cleanup takes the handler's settings out of its zone, and lets go of
// the zone once the handler's requests still running have finished (see
// handlerUse).
func (h *Handler) Cleanup() error {
	if h.zone != nil {
		h.zone.unhold(h.pol)
		if h.use.active.Load() > 0 || h.zone.lingering.Load() > 0 {
			// Calls running, of this handler or of one cleaned up
			// before, hold the zone's end back: what was counted until
			// now is saved now, in case the process stops first.
			h.zone.flushSoon(cleanupFlushWait)
		}
		h.zone.lingering.Add(1)
		h.use.cleanup()
	}
	return nil
}

// cleanupFlushWait bounds how long a cleanup waits for the flush it asks
// for (see flushSoon): a storage lock's wait, as a flush's own.
const cleanupFlushWait = 10 * time.Second

// letGo drops the handler's hold on its zone's life: the zone goes with
// the last handler that holds it.
func (h *Handler) letGo() {
	h.zone.lingering.Add(-1)
	if err := dropZone(h.zone); err != nil {
		h.logger.Error("releasing zone", zap.String("zone", h.zone.name), zap.Error(err))
	}
}

// ServeHTTP admits or refuses the request, then forwards admitted ones and
// learns from the backend's answer.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	// A GET is a listen stream, open for as long as the client stays:
	// it learns nothing at its end, and must not hold the zone's end
	// back (a zone that a stop could not end would not flush).
	counted := r.Method != http.MethodGet
	if counted {
		h.use.enter()
	}
	defer h.use.leave(counted)
	start := time.Now()
	d := h.newDecision(r, start)
	defer d.release()
	if refused := h.admit(d, w, r); refused {
		h.zone.metrics.observe(start)
		if d.linger {
			lingerOn(w, r)
		}
		return nil
	}
	h.zone.metrics.observe(start)
	if (d.concAll || d.concID) && d.req != nil {
		d.watch.expect(d.req, d.pol.meter) // before the body, which d.req reads, goes on
		d.listens = listenOnly(d.req)
	}
	d.handOn(r)
	// Request trailers stop here: servers such as uvicorn with httptools
	// merge them into the headers their application reads, so a
	// credential (or a Content-Encoding) sent as a trailer would be one
	// the limiter never saw, and reverse_proxy forwards them.
	r.Trailer = nil
	h.writeRateLimitHeaders(w, d, d.dryRefusal())
	d.rec = statusRecorder{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, d: d, r: r}
	defer d.finish()
	err := next.ServeHTTP(&d.rec, d.detach(r))
	d.unheard()
	d.rec.learnError(err)
	if err != nil {
		d.holdThroughErrorRoutes(r)
	}
	return err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
