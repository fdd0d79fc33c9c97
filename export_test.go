package mcplimit

// MinBucketRoom is minBucketRoom for the external tests, which fill a
// bucket set to see what a full one refuses.
const MinBucketRoom = minBucketRoom
