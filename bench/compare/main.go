// Command compare measures the cost of mcp_ratelimit end to end: it
// starts a minimal fast backend and two Caddy processes built from
// ./cmd/caddy — one with `mcp_ratelimit` (limits set so none binds) in
// front of `reverse_proxy`, one with `reverse_proxy` alone — and drives
// both with the same tools/call load in interleaved rounds (A B A B …),
// reporting the median throughput and p99 latency of each.
//
//	go run ./bench/compare -rounds 6 -duration 3s -conns 32
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	rounds := flag.Int("rounds", 6, "rounds per configuration, interleaved")
	duration := flag.Duration("duration", 3*time.Second, "length of one round")
	conns := flag.Int("conns", 32, "concurrent keep-alive clients")
	tenants := flag.Int("tenants", 100, "distinct bearer tokens")
	flag.Parse()

	dir, err := os.MkdirTemp("", "mcp-compare-")
	check(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "caddy")
	build := exec.Command("go", "build", "-o", bin, "./cmd/caddy")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	check(build.Run())

	backend := startBackend()
	plain := startCaddy(bin, dir, "plain", "reverse_proxy "+backend)
	limited := startCaddy(bin, dir, "limited", `mcp_ratelimit {
		preauth 1000000/s burst 1000000
		tenant 1000000/s burst 1000000
		global 1000000/s burst 1000000
		quota 1000000000/day
	}
	reverse_proxy `+backend)
	defer plain.Process.Kill()
	defer limited.Process.Kill()

	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"search_documents","arguments":{"query":"quarterly revenue by region for the last fiscal year","limit":25,"include_archived":false,"sort":"relevance"},"_meta":{"progressToken":"0c5d3a9e-7d1f-4b8a-9f2e-3c6b1a2d4e5f"}}}`)
	targets := []struct {
		name string
		url  string
	}{{"caddy + reverse_proxy", plainURL}, {"caddy + mcp_ratelimit + reverse_proxy", limitedURL}}
	results := map[string][]result{}
	for _, t := range targets { // warm up and prove the tokens
		run(t.url, body, *conns, *tenants, time.Second)
	}
	for i := range *rounds {
		for _, t := range targets {
			r := run(t.url, body, *conns, *tenants, *duration)
			results[t.name] = append(results[t.name], r)
			fmt.Fprintf(os.Stderr, "round %d %-40s %8.0f req/s  p99 %v  errors %d\n", i+1, t.name, r.rps, r.p99, r.errors)
		}
	}
	fmt.Printf("| configuration | median req/s | median p99 | rounds |\n|---|---|---|---|\n")
	base := median(results[targets[0].name])
	for _, t := range targets {
		m := median(results[t.name])
		fmt.Printf("| %s | %.0f (%.3f×) | %v (%.2f×) | %d |\n", t.name, m.rps, m.rps/base.rps, m.p99, float64(m.p99)/float64(base.p99), len(results[t.name]))
	}
}

var plainURL, limitedURL string

type result struct {
	rps    float64
	p99    time.Duration
	errors int64
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

// run drives url with conns keep-alive clients for d.
func run(url string, body []byte, conns, tenants int, d time.Duration) result {
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
			token := "Bearer valid-" + strconv.Itoa(c%tenants)
			var local []time.Duration
			for ctx.Err() == nil {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Authorization", token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					errors.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errors.Add(1)
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

// startBackend serves a fixed tools/call result as fast as possible.
func startBackend() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	answer := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		}))
	}()
	return l.Addr().String()
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCaddy runs one Caddy process with site as its only site.
func startCaddy(bin, dir, name, site string) *exec.Cmd {
	port, admin := freePort(), freePort()
	home := filepath.Join(dir, name)
	check(os.MkdirAll(home, 0o700))
	cfg := fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tpersist_config off\n\tauto_https off\n\tstorage file_system %s\n\tlog {\n\t\tlevel ERROR\n\t}\n}\nhttp://127.0.0.1:%d {\n\tbind 127.0.0.1\n\t%s\n}\n",
		admin, filepath.Join(home, "storage"), port, site)
	file := filepath.Join(home, "Caddyfile")
	check(os.WriteFile(file, []byte(cfg), 0o600))
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"))
	cmd.Stderr = io.Discard
	check(cmd.Start())
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(admin) + "/config/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("%s caddy did not start", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if name == "plain" {
		plainURL = url
	} else {
		limitedURL = url
	}
	return cmd
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
