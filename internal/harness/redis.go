package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Redis is a redis-server started for one test on a free loopback port,
// with persistence off and its own temporary directory.
type Redis struct {
	// Addr is 127.0.0.1:<port>.
	Addr string
	// URL is redis://127.0.0.1:<port>/0.
	URL  string
	Port int
	dir  string
	// args are the server's arguments beyond its port and persistence,
	// given the port: those of a cluster's node (see StartRedisCluster).
	args func(port int) []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	// exited is closed once cmd has exited and its output is complete.
	exited chan struct{}
}

// StartRedis starts redis-server and stops it when the test ends. A
// missing redis-server fails the test (CI installs Debian's package).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return startRedis(t, nil)
}

// startRedis starts redis-server with args (see Redis.args), nil for none.
func startRedis(t testing.TB, args func(port int) []string) *Redis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server is not installed (apt-get install -y redis-server; .ci/run does it): %v", err)
	}
	r := &Redis{dir: t.TempDir(), args: args}
	t.Cleanup(r.Kill)
	// A port free in this process may be taken by another test process
	// (go test runs packages in parallel) between FreePort and the
	// server's bind: that server then exits, and the one answering is
	// the other process's, which goes away with its test.
	for range 5 {
		r.Port = FreePort(t)
		r.Addr = "127.0.0.1:" + strconv.Itoa(r.Port)
		r.URL = "redis://" + r.Addr + "/0"
		err := r.start()
		if err == nil {
			return r
		}
		if err != errPortTaken {
			t.Fatal(err)
		}
	}
	t.Fatal("redis-server: every port tried was taken")
	return nil
}

// errPortTaken says the server's port was taken by another process.
var errPortTaken = errors.New("redis-server: port taken by another process")

// Start (re)starts the server on the same port.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
}

// start starts the server on r.Port and waits until it answers: it, not
// another process's server on that port.
func (r *Redis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := &bytes.Buffer{}
	args := []string{"--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--enable-debug-command", "local"}
	if r.args != nil {
		args = append(args, r.args(r.Port)...)
	}
	cmd := exec.Command("redis-server", args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // out is complete once it returns
		close(exited)
	}()
	r.cmd, r.exited = cmd, exited
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			r.cmd = nil
			if strings.Contains(out.String(), "in use") {
				return errPortTaken
			}
			return fmt.Errorf("redis-server exited: %s", out)
		default:
		}
		if info, err := r.do("INFO", "server"); err == nil {
			if strings.Contains(info, "process_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
				return nil
			}
			r.killLocked()
			return errPortTaken
		}
		if time.Now().After(deadline) {
			r.killLocked()
			return fmt.Errorf("redis-server did not start: %s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill stops the server with SIGKILL (its data is lost: persistence is off).
func (r *Redis) Kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killLocked()
}

// killLocked is Kill with r.mu held: it returns once the server is gone.
func (r *Redis) killLocked() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// Pause freezes the server (SIGSTOP): it keeps its data and its port, and
// answers nothing until Resume.
func (r *Redis) Pause(t testing.TB) { r.signal(t, syscall.SIGSTOP) }

// Resume lets a paused server run again (SIGCONT).
func (r *Redis) Resume(t testing.TB) { r.signal(t, syscall.SIGCONT) }

func (r *Redis) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		t.Fatal("redis is not running")
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// Do sends one command (inline protocol) and returns the reply's text:
// the value of a bulk or simple reply, the number of an integer reply.
func (r *Redis) Do(t testing.TB, args ...string) string {
	t.Helper()
	s, err := r.do(args...)
	if err != nil {
		t.Fatalf("redis %v: %v", args, err)
	}
	return s
}

// Command is Do without a test: for goroutines (DEBUG SLEEP).
func (r *Redis) Command(args ...string) (string, error) { return r.do(args...) }

func (r *Redis) do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(c))
}

// readReply reads one reply: an array's elements are its replies' text,
// one per line.
func readReply(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", &redisError{line[1:]}
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		elems := make([]string, 0, max(n, 0))
		for range n {
			e, err := readReply(rd)
			if err != nil {
				return "", err
			}
			elems = append(elems, e)
		}
		return strings.Join(elems, "\n"), nil
	}
	return line, nil
}

type redisError struct{ msg string }

func (e *redisError) Error() string { return "redis: " + e.msg }

// Calls returns the number of calls of each command since the server
// started (or since CONFIG RESETSTAT), from INFO commandstats, keyed by
// lower-case command name.
func (r *Redis) Calls(t testing.TB) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, line := range strings.Split(r.Do(t, "INFO", "commandstats"), "\n") {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		if !ok {
			continue
		}
		name, stats, _ := strings.Cut(rest, ":")
		for _, f := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				out[name] = n
			}
		}
	}
	return out
}

// CallsBetween is the total number of commands other than INFO between two
// Calls snapshots.
func CallsBetween(before, after map[string]int64) int64 {
	var n int64
	for k, v := range after {
		if k == "info" {
			continue
		}
		n += v - before[k]
	}
	return n
}

// StoreStatus is the store section of a zone's admin view (the Redis store).
type StoreStatus struct {
	Type      string `json:"type"`
	Degraded  bool   `json:"degraded"`
	LastError string `json:"last_error"`
	Failures  uint64 `json:"failures"`
	Pending   int    `json:"pending"`
	Pushed    uint64 `json:"pushed"`
}

// GetStore fetches the store section of a zone's admin view.
func GetStore(t testing.TB, admin, zone string) StoreStatus {
	t.Helper()
	body := adminGet(t, admin+"/mcp_ratelimit/"+zone)
	var z struct {
		Store *StoreStatus `json:"store"`
	}
	if err := json.Unmarshal(body, &z); err != nil || z.Store == nil {
		t.Fatalf("zone %s has no store section (%v): %s", zone, err, body)
	}
	return *z.Store
}
