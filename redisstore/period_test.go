package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/quota"
	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// The script's calendar (civil dates from day numbers) must name and end
// periods exactly as quota.Period does, across month, year and leap-day
// boundaries.
func TestScriptPeriodsMatchQuotaPeriods(t *testing.T) {
	r := harness.StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer c.Close()
	script := redis.NewScript(redisstore.LuaDate + `
local s, e = period(tonumber(ARGV[1]), tonumber(ARGV[2]))
return {s, e}`)
	times := []string{
		"1970-01-01T00:00:00Z", "2024-02-28T23:59:59Z", "2024-02-29T12:00:00Z", "2024-03-01T00:00:00Z",
		"2025-12-31T23:59:59Z", "2026-01-01T00:00:00Z", "2026-11-30T10:00:00Z", "2100-02-28T01:00:00Z",
		"2000-02-29T00:00:00Z",
	}
	for _, ts := range times {
		at, _ := time.Parse(time.RFC3339, ts)
		for _, p := range []quota.Period{quota.Day, quota.Month} {
			kind, tag := 1, ":d:"
			if p == quota.Month {
				kind, tag = 2, ":m:"
			}
			v, err := script.Run(context.Background(), c, nil, kind, at.Unix()).Slice()
			if err != nil {
				t.Fatal(err)
			}
			if want := tag + p.ID(at); v[0] != want {
				t.Errorf("%s %s: suffix %v, want %s", ts, p, v[0], want)
			}
			if want := p.Next(at).Unix(); v[1] != want {
				t.Errorf("%s %s: end %v, want %d", ts, p, v[1], want)
			}
		}
	}
}
