package harness

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// BuildCaddy builds ./cmd/caddy once per test binary and returns the
// binary's path.
func BuildCaddy(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "mcp-ratelimit-caddy-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "caddy")
		cmd := exec.Command("go", "build", "-o", build.path, "./cmd/caddy")
		cmd.Dir = root
		build.out, build.err = cmd.CombinedOutput()
	})
	if build.err != nil {
		t.Fatalf("building ./cmd/caddy: %v\n%s", build.err, build.out)
	}
	return build.path
}

// RemoveBuild deletes the binary BuildCaddy built, if it did; a test
// package's TestMain calls it once its tests are done, or every run would
// leave a Caddy binary in the temporary directory.
func RemoveBuild() {
	if build.path != "" {
		_ = os.RemoveAll(filepath.Dir(build.path))
	}
}

// Process is a Caddy process started from the built binary.
type Process struct {
	URL, Admin string
	Port       int
	AdminPort  int
	Home       string
	cmd        *exec.Cmd
	out        *bytes.Buffer
	mu         *sync.Mutex
	config     string
	bin        string
}

// StartProcess runs the binary with a Caddyfile rendered by Config (site
// body, backend, storage directory). Each process gets its own HOME (and
// so its own Caddy instance ID); pass home to restart the same instance.
func StartProcess(t testing.TB, bin, site, backend, storage, home string) *Process {
	t.Helper()
	p := &Process{Port: FreePort(t), AdminPort: FreePort(t), Home: home, bin: bin}
	if p.Home == "" {
		p.Home = t.TempDir()
	}
	p.URL = "http://127.0.0.1:" + strconv.Itoa(p.Port)
	p.Admin = "http://127.0.0.1:" + strconv.Itoa(p.AdminPort)
	p.config = filepath.Join(p.Home, "Caddyfile")
	cfg := Config(site, backend, p.Port, p.AdminPort, storage, "")
	if err := os.WriteFile(p.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p.start(t)
	t.Cleanup(func() { p.Kill() })
	return p
}

func (p *Process) start(t testing.TB) {
	t.Helper()
	p.out, p.mu = &bytes.Buffer{}, &sync.Mutex{}
	cmd := exec.Command(p.bin, "run", "--config", p.config, "--adapter", "caddyfile")
	cmd.Env = p.env()
	w := &lockedWriter{buf: p.out, mu: p.mu}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting caddy: %v", err)
	}
	p.cmd = cmd
	// The admin endpoint answers before the HTTP server listens: wait for
	// both.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.Admin + "/config/")
		if err == nil {
			resp.Body.Close()
			var c net.Conn
			if c, err = net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p.Port)); err == nil {
				c.Close()
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy did not start: %s", p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Exec runs the process's binary with args (in which "{config}" stands for
// the process's config file) in the process's environment, with stdin, and
// returns its standard output.
func (p *Process) Exec(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	args = slices.Clone(args)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "{config}", p.config)
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Env = p.env()
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", p.bin, args, err, stderr.String())
	}
	return string(out)
}

// env is the environment of the process: its own HOME and data dirs.
func (p *Process) env() []string {
	return append(os.Environ(), "HOME="+p.Home, "XDG_DATA_HOME="+filepath.Join(p.Home, "data"), "XDG_CONFIG_HOME="+filepath.Join(p.Home, "config"))
}

// Restart stops the process gracefully and starts it again with the same
// HOME, ports and config.
func (p *Process) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	p.start(t)
}

// Stop ends the process gracefully (SIGINT, so it flushes).
func (p *Process) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}

// Interrupt sends the process SIGINT and returns: a graceful stop starts,
// which Stop waits for.
func (p *Process) Interrupt(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
}

// Kill ends the process with SIGKILL: no final flush.
func (p *Process) Kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// Pause freezes the process (SIGSTOP): its timers and probes wait until
// Resume, for a test to order what other processes do meanwhile.
func (p *Process) Pause(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume lets a paused process run again (SIGCONT).
func (p *Process) Resume(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// Output returns what the process printed so far.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type lockedWriter struct {
	buf *bytes.Buffer
	mu  *sync.Mutex
}

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}
