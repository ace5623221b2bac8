//go:build !unix

package bench

import "time"

// processCPU is not measured here: the reports show a client CPU of zero.
func processCPU() time.Duration { return 0 }
