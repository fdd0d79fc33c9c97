package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
)

// tenantMemory makes n tenants each prove themselves (first call) and
// make a metered call (second), on both Caddys, and reports the growth
// per tenant of the limited one beyond the plain one's.
func tenantMemory(targets []*caddyProc, n, conns int) {
	growth := map[string][2]int64{}
	for _, t := range targets {
		heap0, rss0 := t.memory()
		drive(n, conns, func(client *http.Client, i int) {
			token := "Bearer valid-tenant-" + strconv.Itoa(i)
			_, _ = post(client, t.url, token, "")
			_, _ = post(client, t.url, token, "")
		})
		heap1, rss1 := t.memory()
		growth[t.name] = [2]int64{heap1 - heap0, rss1 - rss0}
		fmt.Fprintf(os.Stderr, "%-8s heap +%d B, RSS +%d B\n", t.name, heap1-heap0, rss1-rss0)
	}
	p, l := growth["plain"], growth["limited"]
	fmt.Printf("| measure | plain Caddy | with mcp_ratelimit | per tenant beyond plain |\n|---|---|---|---|\n")
	fmt.Printf("| heap growth, %d tenants | %d B | %d B | %.0f B |\n", n, p[0], l[0], float64(l[0]-p[0])/float64(n))
	fmt.Printf("| RSS growth, %d tenants | %d B | %d B | %.0f B |\n", n, p[1], l[1], float64(l[1]-p[1])/float64(n))
}

// flood sends n requests, each with a fresh random bearer and a fresh
// random X-Forwarded-For, to both Caddys.
func flood(targets []*caddyProc, n, conns int) {
	fmt.Printf("| configuration | requests | reached the backend | RSS growth |\n|---|---|---|---|\n")
	for _, t := range targets {
		_, rss0 := t.memory()
		before := t.backend.hits.Load()
		drive(n, conns, func(client *http.Client, i int) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			xff := fmt.Sprintf("%d.%d.%d.%d", b[8], b[9], b[10], b[11])
			_, _ = post(client, t.url, "Bearer "+hex.EncodeToString(b[:8]), xff)
		})
		_, rss1 := t.memory()
		reached := t.backend.hits.Load() - before
		fmt.Fprintf(os.Stderr, "%-8s reached %d, RSS +%d B\n", t.name, reached, rss1-rss0)
		fmt.Printf("| %s | %d | %d | %.1f MB |\n", t.label, n, reached, float64(rss1-rss0)/1e6)
	}
}

// drive runs fn for i in [0, n) on conns workers with keep-alive clients.
func drive(n, conns int, fn func(client *http.Client, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(client, i)
			}
		}()
	}
	wg.Wait()
}
