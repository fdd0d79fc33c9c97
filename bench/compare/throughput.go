package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
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
	cpu    time.Duration // the Caddy process's CPU time per request
}

// throughput runs interleaved rounds with load (run or a wrkRunner's)
// and prints a Markdown table. The order alternates (A B, B A, A B …), so
// that a host slowing down or speeding up during a pair favours neither.
// Besides the ratio of the medians, it prints the median of the per-round
// ratios to the first configuration: each compares two measurements taken
// seconds apart, so drift between rounds cancels out of it. It also prints
// each Caddy's median CPU time per request, and its difference from the
// first's: what the module costs the server itself, apart from the load
// generator's and the backend's share of the cores.
func throughput(targets []*caddyProc, rounds int, d time.Duration, conns int, load func(url string, conns int, d time.Duration) result) {
	results := map[string][]result{}
	for _, t := range targets { // warm up and prove the tokens
		load(t.url, conns, time.Second)
	}
	for i := range rounds {
		order := slices.Clone(targets)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, t := range order {
			cpu0 := t.cpuTime()
			r := load(t.url, conns, d)
			if n := r.rps * d.Seconds(); n > 0 {
				r.cpu = time.Duration(float64(t.cpuTime()-cpu0) / n)
			}
			results[t.name] = append(results[t.name], r)
			fmt.Fprintf(os.Stderr, "round %d %-8s %8.0f req/s  p99 %v  Caddy CPU %v/req  errors %d\n", i+1, t.name, r.rps, r.p99, r.cpu.Round(100*time.Nanosecond), r.errors)
		}
	}
	fmt.Printf("| configuration | median req/s | median p99 | median of round ratios (req/s, p99) | median Caddy CPU per request | rounds |\n|---|---|---|---|---|---|\n")
	baseRounds := results[targets[0].name]
	base := median(baseRounds)
	for _, t := range targets {
		rs := results[t.name]
		m := median(rs)
		rps, p99 := make([]float64, len(rs)), make([]float64, len(rs))
		for i, r := range rs {
			rps[i] = r.rps / baseRounds[i].rps
			p99[i] = float64(r.p99) / float64(baseRounds[i].p99)
		}
		cpu := m.cpu.Round(100 * time.Nanosecond).String()
		if t != targets[0] {
			delta := (m.cpu - base.cpu).Round(100 * time.Nanosecond)
			sign := "+"
			if delta < 0 {
				sign = ""
			}
			cpu += fmt.Sprintf(" (%s%v, %.3f×)", sign, delta, float64(m.cpu)/float64(base.cpu))
		}
		fmt.Printf("| %s | %.0f (%.3f×) | %v (%.2f×) | %.3f×, %.2f× | %s | %d |\n", t.label, m.rps, m.rps/base.rps,
			m.p99.Round(time.Microsecond), float64(m.p99)/float64(base.p99), medianOf(rps), medianOf(p99), cpu, len(rs))
	}
}

// median returns the median throughput, p99 and CPU per request of rs.
func median(rs []result) result {
	rps := make([]float64, len(rs))
	p99 := make([]float64, len(rs))
	cpu := make([]float64, len(rs))
	for i, r := range rs {
		rps[i], p99[i], cpu[i] = r.rps, float64(r.p99), float64(r.cpu)
	}
	return result{rps: medianOf(rps), p99: time.Duration(medianOf(p99)), cpu: time.Duration(medianOf(cpu))}
}

// medianOf returns the median of xs, which it sorts: the mean of the two
// middle values for an even count.
func medianOf(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
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
