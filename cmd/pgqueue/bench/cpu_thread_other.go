//go:build !linux

package bench

import "time"

// threadCPU is not measured here; the server sampler, which needs Linux's
// /proc, does not run either.
func threadCPU() time.Duration { return 0 }
