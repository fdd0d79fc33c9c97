package mcplimit

import (
	"bytes"
	"net/netip"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/mcpratelimit/caddy-mcp-ratelimit/buckets"
)

// A zone that a config load leaves unused stops, and a later load that
// names it again starts it anew: its quotas and proven identities continue
// from storage, but its buckets, in-flight counts and metrics live in
// memory only. So that renaming a zone and back, or deleting its route and
// adding it again (two loads through the admin API), hands no one a fresh
// burst, a stopped zone parks them, and a zone of the same name started on
// the same storage, under the same fingerprint key, while they are parked
// takes them up (in another storage it is another deployment's zone), its
// metrics' totals going on. They are kept until every bucket would have
// refilled (the longest burst/rate of the limits the zone had, at most
// maxParked): fresh buckets are then the same; and while calls the zone
// admitted are in flight, whose slots of a concurrency cap must count.

// maxParked bounds how long a stopped zone's buckets are kept.
const maxParked = 24 * time.Hour

// inMemory is what a zone holds in memory only: its buckets, its calls in
// flight and its metrics.
type inMemory struct {
	preauth *buckets.Set[netip.Prefix]
	tenants *buckets.Set[[16]byte]
	groups  *buckets.Set[[16]byte]
	global  *buckets.Set[[16]byte]
	anon    *buckets.Set[[16]byte]
	perID   *buckets.Gauge[[16]byte]
	all     *buckets.Gauge[[16]byte]
	metrics *zoneMetrics
}

// parkedZone is a stopped zone's inMemory state.
type parkedZone struct {
	inMemory
	key     []byte            // the fingerprint key the bucket keys were made with
	storage certmagic.Storage // the storage the zone used
	expiry  *time.Timer
}

// parked holds the parked zones by name.
var parked = struct {
	sync.Mutex
	zones map[string]*parkedZone
}{zones: map[string]*parkedZone{}}

// park keeps the stopped zone's buckets, in-flight counts and metrics for
// a zone of its name started within the longest time one of its buckets
// takes to refill, or while calls it admitted are still in flight.
func (z *zone) park() {
	pol := z.pol.Load()
	keep := time.Duration(0)
	for _, l := range []layer{layerPreauth, layerTenant, layerGroup, layerGlobal, layerAnonymous} {
		refill, _, _ := pol.refill(l)
		keep = max(keep, refill)
	}
	p := &parkedZone{inMemory: z.inMemory, key: z.fpKey.Load().key, storage: *z.storage.cur.Load()}
	if keep <= 0 && !p.busy() {
		return
	}
	parked.Lock()
	defer parked.Unlock()
	if old := parked.zones[z.name]; old != nil {
		old.expiry.Stop()
	}
	parked.zones[z.name] = p
	p.expireAfter(z.name, min(keep, maxParked))
}

// busyCheck is how often a parked zone whose time is up looks again
// whether its calls in flight have ended.
const busyCheck = 10 * time.Second

// busy reports whether calls the parked zone admitted are still in flight:
// their slots of a concurrency cap, and their count, must reach the zone
// that takes it up, however long they run.
func (p *parkedZone) busy() bool {
	return p.all.Len() > 0 || p.perID.Len() > 0 || p.metrics.inflightN.Load() > 0
}

// expireAfter drops p, parked as name, after d, or once its calls in
// flight have ended. parked must be held.
func (p *parkedZone) expireAfter(name string, d time.Duration) {
	p.expiry = time.AfterFunc(d, func() {
		parked.Lock()
		defer parked.Unlock()
		switch {
		case parked.zones[name] != p:
		case p.busy():
			p.expireAfter(name, busyCheck)
		default:
			delete(parked.zones, name)
		}
	})
}

// adoptParked gives the new zone z the buckets, in-flight counts and
// metrics of a stopped zone of its name, when one parked them on its
// storage under its fingerprint key, with the capacity z's policy asks
// for.
func (z *zone) adoptParked(capacity zoneCapacity) {
	parked.Lock()
	p := parked.zones[z.name]
	if p == nil || !sameStorage(p.storage, *z.storage.cur.Load()) || !bytes.Equal(p.key, z.fpKey.Load().key) {
		parked.Unlock()
		return
	}
	delete(parked.zones, z.name)
	p.expiry.Stop()
	parked.Unlock()
	z.inMemory = p.inMemory
	z.metrics.revive()
	z.preauth.SetCapacity(bucketRoom(capacity.maxKnown))
	z.tenants.SetCapacity(bucketRoom(capacity.maxKnown))
	z.groups.SetCapacity(bucketRoom(capacity.maxKnown))
}
