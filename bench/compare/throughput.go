package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	rps    float64
	p99    time.Duration
	errors int64
}

// throughput runs interleaved rounds with load (run or a wrkRunner's)
// and prints a Markdown table.
func throughput(targets []*caddyProc, rounds int, d time.Duration, conns int, load func(url string, conns int, d time.Duration) result) {
	results := map[string][]result{}
	for _, t := range targets { // warm up and prove the tokens
		load(t.url, conns, time.Second)
	}
	for i := range rounds {
		for _, t := range targets {
			r := load(t.url, conns, d)
			results[t.name] = append(results[t.name], r)
			fmt.Fprintf(os.Stderr, "round %d %-8s %8.0f req/s  p99 %v  errors %d\n", i+1, t.name, r.rps, r.p99, r.errors)
		}
	}
	fmt.Printf("| configuration | median req/s | median p99 | rounds |\n|---|---|---|---|\n")
	base := median(results[targets[0].name])
	for _, t := range targets {
		m := median(results[t.name])
		fmt.Printf("| %s | %.0f (%.3f×) | %v (%.2f×) | %d |\n", t.label, m.rps, m.rps/base.rps,
			m.p99.Round(time.Microsecond), float64(m.p99)/float64(base.p99), len(results[t.name]))
	}
}

// median returns the median throughput and the median p99 of rs.
func median(rs []result) result {
	rps := make([]float64, len(rs))
	p99 := make([]time.Duration, len(rs))
	for i, r := range rs {
		rps[i], p99[i] = r.rps, r.p99
	}
	sort.Float64s(rps)
	sort.Slice(p99, func(i, j int) bool { return p99[i] < p99[j] })
	return result{rps: rps[len(rps)/2], p99: p99[len(p99)/2]}
}

// run drives url with conns keep-alive clients (100 tenants) for d.
func run(url string, conns int, d time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errors    atomic.Int64
		wg        sync.WaitGroup
	)
	start := time.Now()
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			token := "Bearer valid-" + strconv.Itoa(c%100)
			var local []time.Duration
			for ctx.Err() == nil {
				t0 := time.Now()
				if status, err := post(client, url, token, ""); err != nil || status != http.StatusOK {
					errors.Add(1)
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	r := result{rps: float64(len(latencies)) / elapsed.Seconds(), errors: errors.Load()}
	if len(latencies) > 0 {
		r.p99 = latencies[len(latencies)*99/100]
	}
	return r
}

// post sends one tools/call and drains the answer.
func post(client *http.Client, url, token, xff string) (int, error) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(toolCall))
	req.Header.Set("Authorization", token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}
