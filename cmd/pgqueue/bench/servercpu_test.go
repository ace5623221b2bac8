package bench

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// burnUntil spends CPU on the calling goroutine until cpu() has grown by
// d; false if that took over ten seconds of wall time (cpu() is not
// counting it).
func burnUntil(cpu func() time.Duration, d time.Duration) bool {
	start, deadline := cpu(), time.Now().Add(10*time.Second)
	for x := 0; cpu()-start < d; x++ {
		if time.Now().After(deadline) {
			return false
		}
		for i := range 100_000 {
			x ^= i
		}
	}
	return true
}

// TestThreadCPU: a goroutine locked to its thread reads its own CPU, not
// another goroutine's.
func TestThreadCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RUSAGE_THREAD is Linux's")
	}
	counted := make(chan bool)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		counted <- burnUntil(threadCPU, 30*time.Millisecond)
	}()
	if !<-counted {
		t.Fatal("a locked goroutine burned CPU for ten seconds, and its thread's CPU did not grow by 30 ms")
	}

	started, burnt, other := make(chan struct{}), make(chan struct{}), make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		close(started)
		<-burnt
		other <- threadCPU() - start
	}()
	<-started
	if !burnUntil(processCPU, 100*time.Millisecond) {
		t.Fatal("the process's CPU did not grow by 100 ms in ten seconds")
	}
	close(burnt)
	if got := <-other; got >= 20*time.Millisecond {
		t.Fatalf("a waiting thread's CPU while another goroutine burned 100 ms: %s", got)
	}
}

// TestServerCPUOwnCPU: the sampler measures what its sampling cost, so
// that the client's CPU can leave it out.
func TestServerCPUOwnCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the sampler reads Linux's /proc")
	}
	ctx := context.Background()
	pool := pgtest.DB().NewPool(t)
	s, err := startServerCPU(ctx, &Config{Pool: pool}, "pgqueue_bench_test")
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if !s.ok {
		t.Skip("the test server's processes are not readable from here")
	}
	s.mark()
	time.Sleep(5 * sampleEvery) // a few samples
	own := s.ownCPU()
	if own <= 0 {
		t.Fatalf("sampler's own CPU after %d samples: %s", 5, own)
	}
	if own > 5*sampleEvery {
		t.Fatalf("sampler's own CPU %s, more than the time it ran", own)
	}
	if again := s.ownCPU(); again != own {
		t.Fatalf("ownCPU after the sampling ended: %s, then %s", own, again)
	}
}
