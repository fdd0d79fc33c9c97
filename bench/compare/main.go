// Command compare measures what mcp_ratelimit costs end to end, side by
// side with plain Caddy in one run. It builds ./cmd/caddy, starts a
// minimal fast backend per Caddy, and two Caddy processes: one with
// `reverse_proxy` alone, one with `mcp_ratelimit` (limits set so none
// binds) in front of it.
//
//	go run ./bench/compare -mode throughput -rounds 6 -duration 3s -conns 32
//	go run ./bench/compare -mode throughput -load wrk -rounds 10 -duration 5s -conns 32
//	go run ./bench/compare -mode tenants -tenants 200000
//	go run ./bench/compare -mode flood -requests 300000 -conns 32
//
// throughput drives both with the same tools/call load in interleaved
// rounds (A B, B A, A B …) and reports median throughput and p99 latency,
// the median of the per-round ratios, and each Caddy's CPU per request.
// tenants makes N distinct tenants each prove themselves and make a
// metered call, and reports heap and RSS growth per tenant beyond plain
// Caddy's for the same traffic. flood sends requests that each carry a
// fresh random bearer and a fresh random X-Forwarded-For and reports RSS
// growth and how many reached each backend.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// toolCall is a ~300-byte tools/call as the Go SDK sends it.
var toolCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_documents","arguments":{"query":"quarterly revenue by region for the last fiscal year","limit":25,"include_archived":false,"sort":"relevance"},"_meta":{"progressToken":"0c5d3a9e-7d1f-4b8a-9f2e-3c6b1a2d4e5f"}}}`)

// limitedSite is the module with limits set so none binds.
const limitedSite = `mcp_ratelimit {
		preauth 1000000/s burst 1000000
		tenant 1000000/s burst 1000000
		global 1000000/s burst 1000000
		quota 1000000000/day
		max_known 1000000
	}
	reverse_proxy `

// floodSite is the module with its default limits.
const floodSite = `mcp_ratelimit
	reverse_proxy `

func main() {
	mode := flag.String("mode", "throughput", "throughput, tenants or flood")
	rounds := flag.Int("rounds", 6, "throughput: rounds per configuration, interleaved")
	duration := flag.Duration("duration", 3e9, "throughput: length of one round")
	conns := flag.Int("conns", 32, "concurrent clients")
	loadGen := flag.String("load", "go", "throughput: load generator, go (built in) or wrk")
	tenants := flag.Int("tenants", 200000, "tenants: distinct proven tenants")
	requests := flag.Int("requests", 300000, "flood: requests per configuration")
	flag.Parse()
	switch *mode {
	case "throughput", "tenants", "flood":
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", *mode)
		os.Exit(2)
	}
	if *rounds < 1 || *duration <= 0 || *conns < 1 || *tenants < 1 || *requests < 1 {
		fmt.Fprintln(os.Stderr, "-rounds, -duration, -conns, -tenants and -requests must be positive")
		os.Exit(2)
	}
	if *mode == "throughput" && *loadGen != "go" && *loadGen != "wrk" {
		fmt.Fprintf(os.Stderr, "unknown load generator %q\n", *loadGen)
		os.Exit(2)
	}

	dir, err := os.MkdirTemp("", "mcp-compare-")
	check(err)
	atExit(func() { os.RemoveAll(dir) })
	defer runAtExit()
	load := run
	if *mode == "throughput" && *loadGen == "wrk" {
		w, err := newWrkRunner(dir) // before anything starts, so a missing wrk leaves nothing behind
		check(err)
		load = w.run
	}
	bin := filepath.Join(dir, "caddy")
	build := exec.Command("go", "build", "-o", bin, "./cmd/caddy")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	check(build.Run())

	plainBackend, limitedBackend := startBackend(), startBackend()
	plain := startCaddy(bin, dir, "plain", "reverse_proxy "+plainBackend.addr, plainBackend)
	site := limitedSite
	if *mode == "flood" {
		site = floodSite // the defaults: pre-auth 1/s burst 5 is what must hold
	}
	limited := startCaddy(bin, dir, "limited", site+limitedBackend.addr, limitedBackend)
	targets := []*caddyProc{plain, limited}

	switch *mode {
	case "throughput":
		throughput(targets, *rounds, *duration, *conns, load)
	case "tenants":
		tenantMemory(targets, *tenants, *conns)
	case "flood":
		flood(targets, *requests, *conns)
	}
}
