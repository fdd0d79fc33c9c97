package harness

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// StoredDayCounts reads the quota object of today's UTC day of zone from a
// file-system storage directory (<storage>/mcp_ratelimit/<zone>/quota/
// day-YYYY-MM-DD, lines "<key> <count>"). An absent object is empty.
func StoredDayCounts(t testing.TB, storage, zone string) map[string]int64 {
	t.Helper()
	name := "day-" + time.Now().UTC().Format(time.DateOnly)
	return storedCounts(t, filepath.Join(storage, "mcp_ratelimit", zone, "quota", name))
}

func storedCounts(t testing.TB, file string) map[string]int64 {
	t.Helper()
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int64{}
	}
	if err != nil {
		t.Fatalf("reading stored quota: %v", err)
	}
	defer f.Close()
	m := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		m[k] += n
	}
	return m
}

// SumIdentities sums the counts of identity keys ("i/...").
func SumIdentities(m map[string]int64) int64 {
	var n int64
	for k, v := range m {
		if strings.HasPrefix(k, "i/") {
			n += v
		}
	}
	return n
}

// QuotaStore is the quota_store part of a zone's admin view.
type QuotaStore struct {
	Degraded  bool    `json:"degraded"`
	LastError string  `json:"last_error"`
	Pending   int     `json:"pending"`
	Flushes   uint64  `json:"flushes"`
	Failures  uint64  `json:"failures"`
	LastFlush *string `json:"last_flush"`
}

// ZoneStatus is the part of `GET /mcp_ratelimit/<zone>` the tests read.
type ZoneStatus struct {
	Admitted   uint64            `json:"admitted"`
	Refusals   map[string]uint64 `json:"refusals"`
	QuotaStore QuotaStore        `json:"quota_store"`
	Tracked    map[string]int    `json:"tracked"`
}

// GetZone fetches a zone's admin view from the admin endpoint at admin.
func GetZone(t testing.TB, admin, zone string) ZoneStatus {
	t.Helper()
	body := adminGet(t, admin+"/mcp_ratelimit/"+zone)
	var z ZoneStatus
	if err := json.Unmarshal(body, &z); err != nil {
		t.Fatalf("decoding zone status %s: %v", body, err)
	}
	return z
}

// Metric returns the value of the sample whose line starts with series
// (metric name plus labels exactly as exposed, e.g.
// `mcp_ratelimit_quota_degraded{zone="q"}`) on the admin /metrics, and
// whether it was found.
func Metric(t testing.TB, admin, series string) (float64, bool) {
	t.Helper()
	body := adminGet(t, admin+"/metrics")
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, series+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		return v, true
	}
	return 0, false
}

func adminGet(t testing.TB, url string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := adminDo(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return body
}
