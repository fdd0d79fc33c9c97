package mcplimit

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

// The directive runs after the auth handlers (basic_auth, forward_auth),
// whose user placeholders trust_identity reads, and before the routing
// directives (invoke, handle, route): at site level next to handle blocks
// that hold reverse_proxy, ordered only before reverse_proxy it would sit
// behind them and never run.
func init() {
	httpcaddyfile.RegisterHandlerDirective("mcp_ratelimit", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("mcp_ratelimit", httpcaddyfile.Before, "invoke")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	m := new(Handler)
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	mcp_ratelimit [<matcher>] {
//	    zone           <name>
//	    identity       <placeholder>...
//	    trust_identity
//	    reject_status  <code>...
//	    known_ttl      <duration>
//	    max_known      <n>
//	    meter          <method>... | *
//	    cost           <tool> <n>
//	    max_body       <size>
//	    max_batch      <n>
//	    preauth        <rate> [burst <n>] | off
//	    gateway        <cidr>... <rate> [burst <n>]
//	    tenant         <rate> [burst <n>] | off
//	    quota          <n>/<day|month> | off
//	    global         <rate> [burst <n>] | off
//	    anonymous      <rate> [burst <n>] | off
//	    concurrency    <n> [per_identity <m>]
//	    ipv4_prefix    <bits>
//	    ipv6_prefix    <bits>
//	    flush_interval <duration>
//	    error_code     <int>
//	    refuse_with    status | jsonrpc | tool_result
//	    group          <placeholder> <rate> [burst <n>]
//	    group_quota    <n>/<day|month>
//	    tool           <name> { cost <n>; quota <n>/<day|month>; arg <name> max <n>; fail_closed }
//	    store          redis <url> [{ timeout <duration>; cluster }]
//	    tier           <name> { match <placeholder> <value>...; tenant ...; quota ...; concurrency ...; cost <tool> <n> }
//	    override       <fingerprint> { tenant ...; quota ...; concurrency ...; cost <tool> <n> }
//	    dry_run
//	}
//
// A rate is `<n>/<s|m|h>` (or with the unit spelled out: `20/min`).
// `quota` and `group_quota` may be given once per period; `cost`,
// `gateway`, `tool`, `tier` and `override` once per name; every other
// subdirective once.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if err := h.parseBlock(d, false); err != nil {
		return err
	}
	err := checkSoFar(h)
	if err == nil {
		return nil
	}
	// A value the subdirective parsers accept but the handler refuses:
	// parse again, checking after each subdirective, to name its line.
	// That is quadratic in the block's size, so only a failing block pays.
	d.Reset()
	if located := new(Handler).parseBlock(d, true); located != nil {
		return located
	}
	return err
}

// parseBlock parses the directive's block into h. With check, the
// configuration is validated after each subdirective, and a failure is
// reported at the subdirective's first line.
func (h *Handler) parseBlock(d *caddyfile.Dispenser, check bool) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	groupQuotaAt := ""
	for d.NextBlock(0) {
		name := d.Val()
		parse, ok := subdirectives[name]
		if !ok {
			return unknownSubdirective(d, "", name)
		}
		if !repeatable[name] {
			if seen[name] {
				return d.Errf("subdirective %q given more than once", name)
			}
			seen[name] = true
		}
		if name == "group_quota" && groupQuotaAt == "" {
			groupQuotaAt = fmt.Sprintf("%s:%d", d.File(), d.Line())
		}
		file, line := d.File(), d.Line()
		if err := parse(d, h); err != nil {
			return err
		}
		if !check {
			continue
		}
		if err := checkSoFar(h); err != nil {
			return fmt.Errorf("%v, at %s:%d", err, file, line)
		}
	}
	if h.GroupQuota != nil && h.Group == nil {
		return fmt.Errorf("group_quota requires group (the layer it counts for), at %s", groupQuotaAt)
	}
	return nil
}

// unknownSubdirective is the error for a block's line that starts with
// name, which no subdirective of the block (named by prefix) has. A "{"
// there is a block opened after a subdirective that takes none.
func unknownSubdirective(d *caddyfile.Dispenser, prefix, name string) error {
	if name == "{" {
		return d.Errf("%sa block where none belongs: the subdirective before it takes no block", prefix)
	}
	return d.Errf("%sunknown subdirective %q", prefix, name)
}

// repeatable lists the subdirectives that may appear more than once
// (each checks its own duplicates).
var repeatable = map[string]bool{
	"cost": true, "gateway": true, "tool": true, "tier": true, "override": true,
	"quota": true, "group_quota": true,
}

// checkSoFar validates the configuration parsed so far, so that a value
// the subdirective parsers accept but the handler would refuse (a zone
// name with a slash, a Redis URL of the wrong scheme) fails adapt, at its
// line. group_quota waits for its group, which may come later.
func checkSoFar(h *Handler) error {
	probe := *h
	if probe.Group == nil {
		probe.GroupQuota = nil
	}
	_, err := compile(&probe)
	return err
}

type parseFunc func(d *caddyfile.Dispenser, h *Handler) error

// subdirectives maps each subdirective to its parser: adding one touches
// one entry.
var subdirectives map[string]parseFunc

func init() {
	subdirectives = map[string]parseFunc{
		"zone": func(d *caddyfile.Dispenser, h *Handler) error {
			if err := oneArg(d, &h.Zone); err != nil {
				return err
			}
			if h.Zone == "" {
				return d.Err("zone: empty name; leave zone out for the default zone")
			}
			if err := checkZone(h.Zone); err != nil {
				return d.Err(err.Error())
			}
			return nil
		},
		"identity": func(d *caddyfile.Dispenser, h *Handler) error {
			h.Identity = d.RemainingArgs()
			if len(h.Identity) == 0 {
				return d.ArgErr()
			}
			return nil
		},
		"trust_identity": flag(func(h *Handler) *bool { return &h.TrustIdentity }),
		"dry_run":        flag(func(h *Handler) *bool { return &h.DryRun }),
		"reject_status": func(d *caddyfile.Dispenser, h *Handler) error {
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			for _, a := range args {
				code, err := strconv.Atoi(a)
				if err != nil || code < 400 || code > 499 {
					return d.Errf("reject_status %q: want a 4xx status code", a)
				}
				h.RejectStatus = append(h.RejectStatus, code)
			}
			return nil
		},
		"known_ttl":      func(d *caddyfile.Dispenser, h *Handler) error { return durationArg(d, &h.KnownTTL) },
		"flush_interval": func(d *caddyfile.Dispenser, h *Handler) error { return durationArg(d, &h.FlushInterval) },
		"max_known":      func(d *caddyfile.Dispenser, h *Handler) error { return positiveArg(d, &h.MaxKnown) },
		"max_batch":      func(d *caddyfile.Dispenser, h *Handler) error { return positiveArg(d, &h.MaxBatch) },
		"meter": func(d *caddyfile.Dispenser, h *Handler) error {
			h.Meter = d.RemainingArgs()
			if len(h.Meter) == 0 {
				return d.ArgErr()
			}
			if len(h.Meter) > 1 && containsStr(h.Meter, "*") {
				return d.Err("meter: * cannot be combined with method names")
			}
			return nil
		},
		"cost": func(d *caddyfile.Dispenser, h *Handler) error {
			if h.Costs == nil {
				h.Costs = map[string]int64{}
			}
			if err := parseCost(d, h.Costs); err != nil {
				return err
			}
			for tool := range h.Costs {
				if tp := h.Tools[tool]; tp != nil && tp.Cost > 0 {
					return d.Errf("cost %s: cost is given both as `cost %s` and in the tool block", tool, tool)
				}
			}
			return nil
		},
		"max_body": func(d *caddyfile.Dispenser, h *Handler) error {
			var s string
			if err := oneArg(d, &s); err != nil {
				return err
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 {
				return d.Errf("max_body %q: want a positive size such as 1MiB", s)
			}
			if n > maxMaxBody {
				return d.Errf("max_body %q: at most 1GiB", s)
			}
			h.MaxBody = int64(n)
			return nil
		},
		"preauth":   rateDirective(func(h *Handler) **RateLimit { return &h.Preauth }),
		"tenant":    rateDirective(func(h *Handler) **RateLimit { return &h.Tenant }),
		"global":    rateDirective(func(h *Handler) **RateLimit { return &h.Global }),
		"anonymous": rateDirective(func(h *Handler) **RateLimit { return &h.Anonymous }),
		"gateway":   parseGateway,
		"quota": func(d *caddyfile.Dispenser, h *Handler) error {
			return parseQuota(d, &h.Quota, true)
		},
		"group_quota": func(d *caddyfile.Dispenser, h *Handler) error {
			return parseQuota(d, &h.GroupQuota, false)
		},
		"concurrency": func(d *caddyfile.Dispenser, h *Handler) error {
			return parseConcurrency(d, &h.Concurrency, false)
		},
		"ipv4_prefix": func(d *caddyfile.Dispenser, h *Handler) error { return prefixArg(d, &h.IPv4Prefix, 32) },
		"ipv6_prefix": func(d *caddyfile.Dispenser, h *Handler) error { return prefixArg(d, &h.IPv6Prefix, 128) },
		"error_code": func(d *caddyfile.Dispenser, h *Handler) error {
			var s string
			if err := oneArg(d, &s); err != nil {
				return err
			}
			code, err := strconv.Atoi(s)
			if strings.HasPrefix(s, "+") {
				err = errors.New("a sign other than -") // as a count takes none
			}
			if errors.Is(err, strconv.ErrRange) {
				return d.Errf("error_code %q: at most %d digits", s, len(strconv.Itoa(maxFigure)))
			}
			if err != nil || code == 0 {
				return d.Errf("error_code %q: want a non-zero integer", s)
			}
			if err := checkErrorCode(code); err != nil {
				return d.Err(err.Error())
			}
			h.ErrorCode = code
			return nil
		},
		"refuse_with": func(d *caddyfile.Dispenser, h *Handler) error {
			if err := oneArg(d, &h.RefuseWith); err != nil {
				return err
			}
			switch h.RefuseWith {
			case "status", "jsonrpc", "tool_result":
				return nil
			}
			return d.Errf("refuse_with %q: want status, jsonrpc or tool_result", h.RefuseWith)
		},
		"group":    parseGroup,
		"tool":     parseTool,
		"store":    parseStore,
		"tier":     parseTier,
		"override": parseOverride,
	}
}

func oneArg(d *caddyfile.Dispenser, dst *string) error {
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.ArgErr()
	}
	*dst = args[0]
	return nil
}

func flag(field func(*Handler) *bool) parseFunc {
	return func(d *caddyfile.Dispenser, h *Handler) error {
		if d.NextArg() {
			return d.ArgErr()
		}
		*field(h) = true
		return nil
	}
}

// durationSyntax matches what caddy.ParseDuration reads, whatever its
// size: a duration it refuses that matches is too long to hold.
var durationSyntax = regexp.MustCompile(`^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h|d))+$`)

func durationArg(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	name := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil && durationSyntax.MatchString(s) {
		return d.Errf("%s %q: too long: at most %dh", name, s, math.MaxInt64/int64(time.Hour))
	}
	if err != nil || dur <= 0 {
		return d.Errf("%s %q: want a positive duration such as 30s or 24h", name, s)
	}
	*dst = caddy.Duration(dur)
	return nil
}

// parseCount parses a count written in decimal digits alone: a sign is
// refused, as it is in a rate (`+5/s`).
func parseCount[T int | int64](s string) (T, error) {
	if strings.HasPrefix(s, "+") {
		return 0, errors.New("a count takes no sign")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return T(n), err
}

func positiveArg(d *caddyfile.Dispenser, dst *int) error {
	name := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	n, err := parseCount[int](s)
	if err != nil || n <= 0 || n > maxFigure {
		return d.Errf("%s %q: want a positive integer, at most %d", name, s, maxFigure)
	}
	*dst = n
	return nil
}

func prefixArg(d *caddyfile.Dispenser, dst *int, maxBits int) error {
	name := d.Val()
	var s string
	if err := oneArg(d, &s); err != nil {
		return err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return d.Errf("%s %q: want a number of bits, 1-%d", name, s, maxBits)
	}
	if n < 1 || n > maxBits {
		return d.Errf("%s %q: out of range 1-%d", name, s, maxBits)
	}
	*dst = n
	return nil
}

// parseRateArgs parses `<rate> [burst <n>]` from args.
func parseRateArgs(d *caddyfile.Dispenser, args []string) (rate string, burst int, err error) {
	switch {
	case len(args) > 0 && args[0] == "burst":
		return "", 0, d.Err("burst without a rate before it: want <n>/<s|m|h> [burst <n>], such as 10/s burst 20")
	case len(args) != 1 && len(args) != 3:
		return "", 0, d.ArgErr()
	}
	if _, _, err := parseRate(args[0]); err != nil {
		return "", 0, d.Errf("%v", err)
	}
	if len(args) == 3 {
		if args[1] != "burst" {
			return "", 0, d.Errf("unexpected %q: want burst <n>", args[1])
		}
		burst, err = parseCount[int](args[2])
		if err != nil || burst <= 0 || burst > maxFigure {
			return "", 0, d.Errf("burst %q: want a positive integer, at most %d", args[2], maxFigure)
		}
	}
	return args[0], burst, nil
}

func rateDirective(field func(*Handler) **RateLimit) parseFunc {
	return func(d *caddyfile.Dispenser, h *Handler) error {
		rl, err := parseRateLimit(d)
		if err != nil {
			return err
		}
		*field(h) = rl
		return nil
	}
}

func parseRateLimit(d *caddyfile.Dispenser) (*RateLimit, error) {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) > 0 && args[0] == "off" {
		if len(args) > 1 {
			return nil, d.Errf("%s off: takes no other arguments", name)
		}
		return &RateLimit{Off: true}, nil
	}
	rate, burst, err := parseRateArgs(d, args)
	if err != nil {
		return nil, err
	}
	return &RateLimit{Rate: rate, Burst: burst}, nil
}

func parseGateway(d *caddyfile.Dispenser, h *Handler) error {
	args := d.RemainingArgs()
	i := 0
	for i < len(args) {
		if _, err := gatewayPrefix(args[i]); err != nil {
			break
		}
		i++
	}
	// args[i] is the first that is no CIDR: the rate, if it is written as
	// one (a bad rate is told what is wrong with it, as the layers' are).
	switch {
	case i == len(args):
		return d.Err("gateway: no rate after the CIDRs: want <cidr>... <rate> [burst <n>]")
	case args[i] == "off":
		return d.Err("gateway: a gateway has no off; leave its line out")
	case !looksLikeRate(args[i]):
		return d.Errf("gateway %q: not a CIDR or address", args[i])
	case i == 0:
		return d.Errf("gateway: no CIDR before the rate %q: want <cidr>... <rate> [burst <n>]", args[i])
	}
	cidrs := args[:i]
	rate, burst, err := parseRateArgs(d, args[i:])
	if err != nil {
		return err
	}
	h.Gateways = append(h.Gateways, Gateway{CIDRs: cidrs, Rate: rate, Burst: burst})
	return nil
}

// looksLikeRate reports whether s, which is no CIDR, is written as a rate
// would be, well formed or not (5/s, 1.5/s, 5/d, 5), rather than as an
// address, a CIDR or a name (10.0.0.300, 10/8, lan): a unit that is not
// digits after a slash, or without a slash a number.
func looksLikeRate(s string) bool {
	if _, unit, slash := strings.Cut(s, "/"); slash {
		return unit != "" && strings.Trim(unit, "0123456789") != ""
	}
	return s != "" && strings.Count(s, ".") <= 1 && strings.Trim(s, "0123456789+-.") == ""
}

func parseQuotaArg(d *caddyfile.Dispenser, name, s string) (n int64, period string, err error) {
	num, period, ok := strings.Cut(s, "/")
	n, perr := parseCount[int64](num)
	if !ok || perr != nil || n <= 0 || n > maxFigure || (period != "day" && period != "month") {
		return 0, "", d.Errf("%s %q: want <n>/<day|month> with a positive <n>, at most %d", name, s, maxFigure)
	}
	return n, period, nil
}

// parseQuota parses `<n>/<day|month>...` (or a lone `off` when allowOff)
// into q, refusing a second value for the same period, on this line or an
// earlier one.
func parseQuota(d *caddyfile.Dispenser, q **QuotaLimit, allowOff bool) error {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	if len(args) == 1 && args[0] == "off" && allowOff {
		if *q != nil {
			return d.Errf("%s off: cannot be combined with other %s lines", name, name)
		}
		*q = &QuotaLimit{Off: true}
		return nil
	}
	for _, s := range args {
		n, period, err := parseQuotaArg(d, name, s)
		if err != nil {
			return err
		}
		if *q == nil {
			*q = &QuotaLimit{}
		}
		if (*q).Off {
			return d.Errf("%s off: cannot be combined with other %s lines", name, name)
		}
		dst := &(*q).Day
		if period == "month" {
			dst = &(*q).Month
		}
		if *dst != 0 {
			return d.Errf("%s: the %s period is given more than once", name, period)
		}
		*dst = n
	}
	return nil
}

// parseConcurrency parses `concurrency <n> [per_identity <m>]` or
// `concurrency per_identity <m>`. In a tier or an override (plan), whose
// limits are the identity's, a lone <n> is the identity's cap.
func parseConcurrency(d *caddyfile.Dispenser, dst **Concurrency, plan bool) error {
	args := d.RemainingArgs()
	c := &Concurrency{}
	switch {
	case len(args) == 1 && args[0] == "off":
		c.Off = true
		args = nil
	case len(args) > 1 && args[0] == "off":
		return d.Errf("concurrency off: takes no other arguments")
	case len(args) > 0 && args[len(args)-1] == "per_identity":
		return d.Errf("concurrency: per_identity takes a positive integer, at most %d; none given", maxFigure)
	case len(args) == 2 && args[0] != "per_identity":
		return d.Errf("concurrency %s: after the cap, want per_identity <positive integer, at most %d>, got %q", args[0], maxFigure, args[1])
	case len(args) == 1 || len(args) == 3:
		n, err := parseCount[int](args[0])
		if err != nil || n <= 0 || n > maxFigure {
			return d.Errf("concurrency %q: want a positive integer, at most %d", args[0], maxFigure)
		}
		c.Max = n
		if plan && len(args) == 1 {
			c.Max, c.PerIdentity = 0, n
		}
		args = args[1:]
	case len(args) == 2:
	default:
		return d.ArgErr()
	}
	if len(args) == 2 {
		m, err := parseCount[int](args[1])
		if args[0] != "per_identity" || err != nil || m <= 0 || m > maxFigure {
			return d.Errf("concurrency: want per_identity <positive integer, at most %d>, got %q %q", maxFigure, args[0], args[1])
		}
		c.PerIdentity = m
	}
	*dst = c
	return nil
}

func parseCost(d *caddyfile.Dispenser, costs map[string]int64) error {
	args := d.RemainingArgs()
	if len(args) != 2 {
		return d.ArgErr()
	}
	n, err := parseCount[int64](args[1])
	if err != nil {
		return d.Errf("cost %s %q: want a positive integer", args[0], args[1])
	}
	if err := checkCost(args[0], n); err != nil {
		return d.Err(err.Error())
	}
	if _, dup := costs[args[0]]; dup {
		return d.Errf("cost %s: given more than once", args[0])
	}
	costs[args[0]] = n
	return nil
}

func parseGroup(d *caddyfile.Dispenser, h *Handler) error {
	args := d.RemainingArgs()
	if len(args) < 2 {
		return d.ArgErr()
	}
	rate, burst, err := parseRateArgs(d, args[1:])
	if err != nil {
		return err
	}
	h.Group = &Group{Key: args[0], Rate: rate, Burst: burst}
	return nil
}

func parseTool(d *caddyfile.Dispenser, h *Handler) error {
	var name string
	if err := oneArg(d, &name); err != nil {
		return err
	}
	if h.Tools == nil {
		h.Tools = map[string]*ToolPolicy{}
	}
	if _, dup := h.Tools[name]; dup {
		return d.Errf("tool %s: given more than once", name)
	}
	tp := &ToolPolicy{}
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub != "quota" && sub != "arg" && seen[sub] {
			return d.Errf("tool %s: %s given more than once", name, sub)
		}
		seen[sub] = true
		switch sub {
		case "cost":
			var s string
			if err := oneArg(d, &s); err != nil {
				return err
			}
			n, err := parseCount[int64](s)
			if err != nil || n <= 0 || n > maxFigure {
				return d.Errf("tool %s cost %q: want a positive integer, at most %d", name, s, maxFigure)
			}
			if _, dup := h.Costs[name]; dup {
				return d.Errf("tool %s: cost is given both as `cost %s` and in the tool block", name, name)
			}
			tp.Cost = n
		case "quota":
			if err := parseQuota(d, &tp.Quota, false); err != nil {
				return err
			}
		case "arg":
			args := d.RemainingArgs()
			switch {
			case len(args) == 0 || args[0] == "":
				return d.Errf("tool %s: arg without a name: want arg <name> max <n>", name)
			case len(args) > 1 && args[1] != "max":
				return d.Errf("tool %s arg %s: unknown bound %q: want arg <name> max <n>", name, args[0], args[1])
			case len(args) != 3:
				return d.Errf("tool %s arg %s: want arg <name> max <n>, with one number", name, args[0])
			}
			if err := checkArgName(name, args[0]); err != nil {
				return d.Err(err.Error())
			}
			// Written as JSON writes a number, as every other figure here:
			// no sign, digit separators or hexadecimal, which ParseFloat
			// takes from Go's syntax.
			v, err := strconv.ParseFloat(args[2], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || strings.HasPrefix(args[2], "+") || strings.ContainsAny(args[2], "_xX") {
				return d.Errf("tool %s arg %s max %q: want a decimal number", name, args[0], args[2])
			}
			if tp.Args == nil {
				tp.Args = ArgBounds{}
			}
			if _, dup := tp.Args[args[0]]; dup {
				return d.Errf("tool %s: arg %s given more than once", name, args[0])
			}
			tp.Args[args[0]] = v
		case "fail_closed":
			if d.NextArg() {
				return d.ArgErr()
			}
			tp.FailClosed = true
		default:
			return unknownSubdirective(d, "tool "+name+": ", sub)
		}
	}
	h.Tools[name] = tp
	return nil
}

func parseStore(d *caddyfile.Dispenser, h *Handler) error {
	args := d.RemainingArgs()
	if len(args) != 2 || args[0] != "redis" {
		return d.Err("store: want redis <url>")
	}
	rs := &RedisStore{URL: args[1]}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "timeout":
			if rs.Timeout != 0 {
				return d.Err("store: timeout given more than once")
			}
			if err := durationArg(d, &rs.Timeout); err != nil {
				return err
			}
		case "cluster":
			if rs.Cluster {
				return d.Err("store: cluster given more than once")
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			rs.Cluster = true
		default:
			return unknownSubdirective(d, "store: ", d.Val())
		}
	}
	h.Store = &Store{Redis: rs}
	return nil
}

// parseLimitsBlock parses the limits of a tier or override block; extra
// handles subdirectives only a tier has.
func parseLimitsBlock(d *caddyfile.Dispenser, what string, l *Limits, extra func(sub string) (bool, error)) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub != "cost" && sub != "quota" && seen[sub] {
			return d.Errf("%s: %s given more than once", what, sub)
		}
		seen[sub] = true
		var err error
		switch sub {
		case "tenant":
			l.Tenant, err = parseRateLimit(d)
		case "quota":
			err = parseQuota(d, &l.Quota, true)
		case "concurrency":
			err = parseConcurrency(d, &l.Concurrency, true)
		case "cost":
			if l.Costs == nil {
				l.Costs = map[string]int64{}
			}
			err = parseCost(d, l.Costs)
		default:
			handled := false
			if extra != nil {
				handled, err = extra(sub)
			}
			if !handled && err == nil {
				return unknownSubdirective(d, what+": ", sub)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseTier(d *caddyfile.Dispenser, h *Handler) error {
	var name string
	if err := oneArg(d, &name); err != nil {
		return err
	}
	for _, t := range h.Tiers {
		if t.Name == name {
			return d.Errf("tier %s: defined more than once", name)
		}
	}
	t := Tier{Name: name}
	what := "tier " + name
	err := parseLimitsBlock(d, what, &t.Limits, func(sub string) (bool, error) {
		if sub != "match" {
			return false, nil
		}
		args := d.RemainingArgs()
		if len(args) < 2 {
			return true, d.Errf("%s: want match <placeholder> <value>...", what)
		}
		t.Match = TierMatch{Placeholder: args[0], Values: args[1:]}
		// What compile checks of the match alone, checked here to name
		// this line rather than the tier's.
		if err := checkTierMatch(name, t.Match); err != nil {
			return true, d.Err(err.Error())
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if t.Match.Placeholder == "" {
		return d.Errf("%s: match <placeholder> <value>... is required", what)
	}
	if t.Limits.empty() {
		return d.Errf("%s: sets no limits", what)
	}
	h.Tiers = append(h.Tiers, t)
	return nil
}

func parseOverride(d *caddyfile.Dispenser, h *Handler) error {
	var fp string
	if err := oneArg(d, &fp); err != nil {
		return err
	}
	if _, err := parseFingerprint(fp); err != nil {
		return d.Errf("override %q: %v", fp, err)
	}
	if h.Overrides == nil {
		h.Overrides = map[string]*Limits{}
	}
	if _, dup := h.Overrides[fp]; dup {
		return d.Errf("override %s: given more than once", fp)
	}
	l := &Limits{}
	if err := parseLimitsBlock(d, "override "+fp, l, nil); err != nil {
		return err
	}
	if l.empty() {
		return d.Errf("override %s: sets no limits", fp)
	}
	h.Overrides[fp] = l
	return nil
}

func containsStr(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
