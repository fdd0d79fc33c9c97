// Package quota counts per-tenant usage against daily and monthly limits
// and shares the counts between every Caddy instance that uses the same
// storage (certmagic.Storage, the file system by default).
//
// # Model
//
// A [Counter] holds one zone's counts. Every count belongs to a key chosen
// by the caller (for example "i/<32 hex>", "g/<32 hex>" or
// "t/<tool>/<32 hex>") and to one period of a [Period] kind: the UTC day or
// the UTC month of the time it was made. Keys must not be empty and must
// not contain a space or a newline.
//
// For each period the Counter keeps, in memory:
//
//   - shared: the totals of all instances as last adopted from storage
//     (they include this instance's own pushed counts);
//   - pending: what this instance counted since its last successful push
//     (negative after a [Counter.Refund]);
//   - inflight: the pending deltas a running [Counter.Flush] is pushing;
//   - observed: what a store deciding in the Counter's place (Redis)
//     last reported, plus what was counted here since ([Counter.Observe]).
//
// Used = max(shared + pending + inflight, observed). [Counter.TryAdd] checks
// and charges under one mutex and never waits on storage. A start while
// storage is unreadable may take shared totals an earlier process copied
// ([Counter.SeedTotals]) until storage is read.
//
// # Storage
//
// Each period is one storage object, <Prefix>/quota/<kind>-<id> (for example
// mcp_ratelimit/default/quota/day-2026-11-30), holding the summed totals of
// all instances as text lines "<key> <count>\n". A flush, for every period
// with pending deltas, locks the object, loads it, adds the deltas, stores it
// and unlocks, then adopts the stored totals. The object starts with its
// history, the writers of its last pushes, so that a push a paused writer
// overwrote is found missing and pushed again (see history.go), and a
// push paused past pushLease stores nothing (see flush.go). A period
// without pending deltas
// is only read, so an idle instance still sees the others' counts. Storage
// operations per flush depend on the number of periods, never on the number of
// keys.
//
// When storage fails the Counter fails open: it keeps counting in memory,
// reports itself degraded (see [Config.OnDegraded] and [Counter.State]) and
// keeps every unpushed delta until a later flush succeeds. A crash loses at
// most the counts of one flush interval; a restart continues from the stored
// totals ([Counter.Load]).
//
// After a period ends its remaining deltas are pushed to its own object on
// the next flush and its memory is released. Objects of periods older than
// the previous one are deleted, once per UTC day; deltas still unpushed for
// such a period (after an outage longer than a whole period) are dropped, as
// they can no longer refuse anything.
//
// The package has no global state; time comes from [Config.Clock] or from
// explicit parameters.
package quota
