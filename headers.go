package mcplimit

import (
	"math"
	"net/http"
	"strings"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
)

// writeRateLimitHeaders sets the IETF RateLimit-Policy and RateLimit
// fields (draft-ietf-httpapi-ratelimit-headers, structured-field syntax)
// for the tenant and quota policies of a metered request by a proven
// identity:
//
//	RateLimit-Policy: "tenant";q=20;w=4, "quota-day";q=5000;w=86400
//	RateLimit: "tenant";r=19;t=1, "quota-day";r=4990;t=3600
//
// For the token bucket, q is the burst, w the seconds to refill it from
// empty, r the whole tokens left and t the seconds until it is full again.
func (h *Handler) writeRateLimitHeaders(w http.ResponseWriter, d *decision) {
	if d.cost <= 0 || !d.proven {
		return
	}
	var pol, cur strings.Builder
	add := func(name string, q, wnd, r, t int64) {
		if pol.Len() > 0 {
			pol.WriteString(", ")
			cur.WriteString(", ")
		}
		pol.WriteString(`"` + name + `";q=` + itoa(q) + ";w=" + itoa(wnd))
		cur.WriteString(`"` + name + `";r=` + itoa(r) + ";t=" + itoa(t))
	}
	if !d.lim.tenantOff && d.lim.tenant.rate > 0 {
		b := d.lim.tenant
		tokens, ok := d.z.tenants.Tokens(d.fp, d.now)
		if !ok {
			tokens = float64(b.burst)
		}
		tokens = math.Max(0, math.Min(tokens, float64(b.burst)))
		fill := int64(math.Ceil(float64(b.burst) / float64(b.rate)))
		until := int64(math.Ceil((float64(b.burst) - tokens) / float64(b.rate)))
		add("tenant", int64(b.burst), fill, int64(math.Floor(tokens)), until)
	}
	q := d.lim.quota
	key := ""
	for _, p := range []struct {
		period quota.Period
		limit  int64
	}{{quota.Day, q.day}, {quota.Month, q.month}} {
		if p.limit <= 0 {
			continue
		}
		if key == "" {
			key = "i/" + fingerprintHex(d.fp)
		}
		used := d.z.quota.Used(key, p.period, d.now)
		start, next := p.period.Start(d.now), p.period.Next(d.now)
		left := max(p.limit-used, 0)
		add("quota-"+p.period.String(), p.limit, int64(next.Sub(start).Seconds()), left, ceilSeconds(next.Sub(d.now)))
	}
	if pol.Len() == 0 {
		return
	}
	hdr := w.Header()
	hdr.Set("RateLimit-Policy", pol.String())
	hdr.Set("RateLimit", cur.String())
}
