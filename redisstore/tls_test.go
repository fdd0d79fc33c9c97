package redisstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/redisstore"
)

// A rediss:// server whose certificate this host does not trust is
// reported as such, not as a timeout: the operator must see what to fix.
// The timeout leaves the handshake room on a loaded host (under CI's
// parallel packages, 50ms did not always).
func TestUntrustedCertificateIsTheError(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler()) // a certificate of its own CA
	defer srv.Close()
	s, err := redisstore.New(redisstore.Config{URL: "rediss://" + srv.Listener.Addr().String(), Zone: "z", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, call := range []struct {
		name string
		err  func() error
	}{
		{"ping", func() error { return s.Ping(context.Background()) }},
		{"fingerprint key", func() error { _, _, err := s.FingerprintKey(context.Background(), make([]byte, 32)); return err }},
	} {
		err := call.err()
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: err = %v, want the certificate's", call.name, err)
		}
	}
}
