package buckets

// pad keeps neighbouring shards' hot fields off each other's cache line.
type pad [64]byte
