// Package cputime reads the CPU time the process has used, so that
// benchmarks can report CPU per operation next to wall time: on a
// machine whose cores are shared, the two differ.
package cputime

import "time"

// Process returns the user plus system CPU time of the whole process so
// far, every thread included (the garbage collector's too), and whether
// the platform reports it.
func Process() (time.Duration, bool) { return process() }
