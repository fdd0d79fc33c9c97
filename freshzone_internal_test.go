package mcplimit

import (
	"strconv"
	"sync/atomic"
)

// zoneRuns numbers the zones FreshZoneName names.
var zoneRuns atomic.Int64

// FreshZoneName is name made unique in the test process, for the
// external tests too: the host's copy of the counts Redis reported, and
// Redis itself, keep counts per zone name, and a zone named as an earlier
// run's (-count) would start from that run's counts.
func FreshZoneName(name string) string {
	return name + "-" + strconv.FormatInt(zoneRuns.Add(1), 10)
}
