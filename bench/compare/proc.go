package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// backend is a minimal fast responder that counts what reaches it.
type backend struct {
	addr string
	hits atomic.Int64
}

// startBackend serves a fixed tools/call result as fast as possible.
func startBackend() *backend {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	b := &backend{addr: l.Addr().String()}
	answer := []byte(`{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"ok"}]}}`)
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.hits.Add(1)
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		}))
	}()
	return b
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// caddyProc is one running Caddy.
type caddyProc struct {
	name, label string
	url, admin  string
	cmd         *exec.Cmd
	backend     *backend
}

// startCaddy runs one Caddy process with site as its only site.
func startCaddy(bin, dir, name, site string, b *backend) *caddyProc {
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
	atExit(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &caddyProc{name: name, label: "caddy + reverse_proxy", cmd: cmd, backend: b,
		url:   "http://127.0.0.1:" + strconv.Itoa(port) + "/mcp",
		admin: "http://127.0.0.1:" + strconv.Itoa(admin)}
	if name != "plain" {
		p.label = "caddy + mcp_ratelimit + reverse_proxy"
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if resp, err := http.Get(p.admin + "/config/"); err == nil {
			resp.Body.Close()
			return p
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("%s caddy did not start", name))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// memory forces a GC through the admin pprof endpoint and returns the
// live heap (from /debug/vars) and the process RSS.
func (p *caddyProc) memory() (heap, rss int64) {
	resp, err := http.Get(p.admin + "/debug/pprof/heap?gc=1")
	check(err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	resp, err = http.Get(p.admin + "/debug/vars")
	check(err)
	var vars struct {
		Memstats struct{ HeapAlloc int64 } `json:"memstats"`
	}
	check(json.NewDecoder(resp.Body).Decode(&vars))
	resp.Body.Close()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	check(err)
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			rss = kb * 1024
		}
	}
	return vars.Memstats.HeapAlloc, rss
}

// cpuTime returns the user plus system CPU time the Caddy process has used
// so far, from /proc/<pid>/stat (in Linux's clock ticks of 10 ms).
func (p *caddyProc) cpuTime() time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	check(err)
	// The command name, in parentheses, may hold spaces: fields are
	// counted after it, from the third (state) on.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	f := strings.Fields(string(rest))
	utime, err := strconv.ParseInt(f[14-3], 10, 64)
	check(err)
	stime, err := strconv.ParseInt(f[15-3], 10, 64)
	check(err)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// exits are what must run however the command ends: stopping the Caddy
// processes it started, removing its temporary directory.
var exits []func()

// atExit registers f to run at exit, after those registered later.
func atExit(f func()) { exits = append(exits, f) }

// runAtExit runs what atExit registered, last first.
func runAtExit() {
	for i := len(exits) - 1; i >= 0; i-- {
		exits[i]()
	}
	exits = nil
}

// check ends the command on err, cleaning up first.
func check(err error) {
	if err != nil {
		runAtExit()
		log.Fatal(err)
	}
}
