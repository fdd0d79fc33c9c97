package mcplimit

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	dto "github.com/prometheus/client_model/go"
)

// localRedis starts a redis-server on a free loopback port for one test
// or benchmark, and returns its URL and process (the harness package
// cannot be imported from here: it imports this one).
func localRedis(tb testing.TB) (string, *os.Process) {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatalf("redis-server is not installed (apt-get install -y redis-server): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tb.TempDir())
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			tb.Fatal("redis-server did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "redis://" + addr + "/0", cmd.Process
}

// BenchmarkServeHTTPAdmittedRedis is BenchmarkServeHTTPAdmitted with the
// tenant, quota and global layers decided in Redis on loopback: one round
// trip per metered call.
func BenchmarkServeHTTPAdmittedRedis(b *testing.B) {
	url, _ := localRedis(b)
	cfg := admitting("bench-admit-redis")
	cfg.Store = &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}}
	h := benchHandler(b, cfg)
	benchServe(b, h, toolCall300, "Bearer valid-bench", http.StatusOK)
	b.StopTimer()
	reportRoundTrips(b, h)
}

// BenchmarkServeHTTPRefusedRedis is BenchmarkServeHTTPRefused with the
// tenant decided in Redis: after the first refusal, the short-circuit
// answers without a round trip.
func BenchmarkServeHTTPRefusedRedis(b *testing.B) {
	url, _ := localRedis(b)
	cfg := refusing("bench-refuse-redis")
	cfg.Store = &Store{Redis: &RedisStore{URL: url, Timeout: caddy.Duration(time.Second)}}
	h := benchHandler(b, cfg)
	benchServe(b, h, toolCall300, "Bearer valid-bench", http.StatusTooManyRequests)
	b.StopTimer()
	reportRoundTrips(b, h)
}

// reportRoundTrips reports Redis round trips per call (the store's
// round-trip histogram count over b.N, less the warm-up's: the two calls
// made as a proven identity; the proving call, unproven, asks Redis
// nothing).
func reportRoundTrips(b *testing.B, h *Handler) {
	n := float64(storeRoundTrips(b, h))
	b.ReportMetric(max(n-2, 0)/float64(b.N), "roundtrips/op")
}

// storeRoundTrips returns the Redis round trips h's zone has made (the
// store's round-trip histogram count).
func storeRoundTrips(tb testing.TB, h *Handler) uint64 {
	tb.Helper()
	var m dto.Metric
	if err := h.zone.metrics.storeRTT.Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}
