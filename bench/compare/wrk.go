package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// wrkScript makes wrk cycle through the same 100 tenants and body as run.
const wrkScript = `local reqs = {}
local i = 0
function init(args)
  for t = 0, 99 do
    reqs[t] = wrk.format("POST", nil, {
      ["Authorization"] = "Bearer valid-" .. t,
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json, text/event-stream",
    }, %q)
  end
end
function request()
  i = (i + 1) %% 100
  return reqs[i]
end
`

// wrkRunner drives rounds with wrk, a C load generator that takes far
// less of the shared CPU than Go clients do.
type wrkRunner struct {
	bin, script string
}

// newWrkRunner writes the request script into dir.
func newWrkRunner(dir string) (*wrkRunner, error) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		return nil, fmt.Errorf("-load wrk needs wrk on PATH (Debian: apt-get install wrk): %w", err)
	}
	script := filepath.Join(dir, "tools-call.lua")
	if err := os.WriteFile(script, fmt.Appendf(nil, wrkScript, toolCall), 0o600); err != nil {
		return nil, err
	}
	return &wrkRunner{bin: bin, script: script}, nil
}

// run drives url for d with conns connections from one wrk thread.
func (w *wrkRunner) run(url string, conns int, d time.Duration) result {
	out, err := exec.Command(w.bin, "-t1", "-c"+strconv.Itoa(conns), "-d"+d.String(),
		"--latency", "-s", w.script, url).Output()
	check(err)
	r, err := parseWrk(out)
	check(err)
	return r
}

// parseWrk reads throughput, p99 and failures from wrk's --latency report.
func parseWrk(out []byte) (result, error) {
	var r result
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, err
			}
			r.rps = v
			found++
		case len(f) == 2 && f[0] == "99%":
			v, err := time.ParseDuration(f[1])
			if err != nil {
				return r, err
			}
			r.p99 = v
			found++
		case len(f) == 5 && f[0] == "Non-2xx":
			n, _ := strconv.ParseInt(f[4], 10, 64)
			r.errors += n
		case len(f) > 2 && f[0] == "Socket" && f[1] == "errors:":
			for _, part := range strings.Split(strings.Join(f[2:], " "), ",") {
				if fs := strings.Fields(part); len(fs) == 2 {
					n, _ := strconv.ParseInt(fs[1], 10, 64)
					r.errors += n
				}
			}
		}
	}
	if found != 2 {
		return r, fmt.Errorf("unexpected wrk output:\n%s", out)
	}
	return r, nil
}
