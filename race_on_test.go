//go:build race

package mcplimit

// raceEnabled says the tests run under the race detector.
const raceEnabled = true
