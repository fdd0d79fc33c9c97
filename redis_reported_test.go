package mcplimit_test

import (
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/internal/harness"
)

// A zone that a reload removes leaves its copy of the counts Redis
// reported to the next zone of its name, which takes the copy into its
// own and removes it, as it does a stopped process's: every removal and
// return added a file on the host, kept until Caddy restarted.
func TestZoneRemovedAndBackLeavesOneCopyOfRedisCounts(t *testing.T) {
	const zone, token = "redis_reported_cycles", "valid-reported-cycles"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	block := "zone " + zone + "\nflush_interval 1s\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 100/day\nstore redis " + rd.URL
	e := start(t, block, harness.Options{Storage: t.TempDir()})
	e.prove(token)
	e.spend(token, 1)
	for range 4 {
		e.caddy.Load(t, harness.Config("reverse_proxy $BACKEND", e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
		e.reloadWith(t, block)
		settleAfterReload(t, e, "Bearer "+token)
		e.spend(token, 1)
	}
	entries, err := os.ReadDir(filepath.Join(data, "caddy", "mcp_ratelimit-redis-reported"))
	if err != nil {
		t.Fatal(err)
	}
	var copies []string
	for _, f := range entries {
		if strings.HasPrefix(f.Name(), hex.EncodeToString([]byte(zone))+".") {
			copies = append(copies, f.Name())
		}
	}
	if len(copies) != 1 {
		t.Fatalf("%d copies of the zone's reported counts after 4 removals and returns, want the running zone's alone: %v", len(copies), copies)
	}
}

// A Redis that lost its data (a restart without persistence, FLUSHALL)
// reports small counts for the identities that call after it: the host's
// copy keeps what Redis held before, so the zone's next start raises
// Redis back to it, and an identity that had used up its quota stays
// refused. Copying the small count instead handed it its quota again.
func TestAStartRaisesARedisThatLostItsDataToWhatItHeld(t *testing.T) {
	const zone, token = "redis_reported_wipe", "valid-reported-wipe"
	skipNearReset(t, nextDay)
	rd := harness.StartRedis(t)
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	block := "zone " + zone + "\nflush_interval 1s\npreauth 100/s burst 100\ntenant 100/s burst 100\nquota 5/day\nstore redis " + rd.URL
	e := start(t, block, harness.Options{Storage: t.TempDir()})
	e.prove(token)
	e.spend(token, 5) // the whole quota, no refusal remembered
	rd.Do(t, "FLUSHALL")
	if r := e.call(10, "Authorization", "Bearer "+token); r.Status != http.StatusOK {
		t.Fatalf("the first call after Redis lost its data: %d, want it admitted (Redis counts from zero)", r.Status)
	}
	time.Sleep(1500 * time.Millisecond) // a flush copies the counts to the host
	e.caddy.Load(t, harness.Config("reverse_proxy $BACKEND", e.backend.Addr, e.caddy.Port, e.caddy.AdminPort, e.caddy.Storage, ""))
	e.reloadWith(t, block)
	settleAfterReload(t, e, "Bearer "+token)
	if r := e.call(11, "Authorization", "Bearer "+token); r.Status != http.StatusTooManyRequests {
		t.Fatalf("a call after the zone started again: %d %s, want the quota's refusal (Redis raised back to 5)", r.Status, r.Body)
	}
}
