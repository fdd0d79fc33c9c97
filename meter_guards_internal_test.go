package mcplimit

import (
	"strings"
	"testing"
)

// "off" in any case is refused as not a method: meter has no off, and a
// layer is turned off on its own.
func TestMeterOffInAnyCaseIsRefused(t *testing.T) {
	for _, m := range []string{"off", "OFF", "Off"} {
		err := compileMeter(new(policy), []string{m})
		if err == nil || !strings.Contains(err.Error(), "is not a method") {
			t.Errorf("meter %s: %v, want the error that off is not a method", m, err)
		}
	}
}
