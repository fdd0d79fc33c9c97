package mcplimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A zone that starts while its storage is unreachable logs the quota
// store's move to degraded once, like any other transition (SPEC: one log
// line per transition), not again as a failure to load.
func TestStartDuringAnOutageLogsTheQuotaStoreOnce(t *testing.T) {
	z, logs := zoneOnUnreadableStorage(t, "outage-start")
	if !z.quota.State().Degraded {
		t.Fatal("the quota store is not degraded with its storage a plain file")
	}
	var lines []string
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "quota store") {
			lines = append(lines, e.Message)
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d log lines about the quota store at a start during an outage, want 1: %q", len(lines), lines)
	}
}

// zoneOnUnreadableStorage starts a zone whose file-system storage is a
// plain file, logging at info level to the returned observer.
func zoneOnUnreadableStorage(t *testing.T, name string) (*zone, *observer.ObservedLogs) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "storage")
	if err := os.WriteFile(path, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := compile(&Handler{Zone: name})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	z, err := newZone(&certmagic.FileStorage{Path: path}, pol, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Destruct() })
	return z, logs
}
