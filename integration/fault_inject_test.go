package integration_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"syscall"
	"time"
)

// faultInjector is the fault loop of TestFaultFlowControl and
// TestFaultWorkflow: a fault every 0.5-2 s, the three kinds (SIGKILL,
// SIGSTOP, terminated backends) in a shuffled order each round; a frozen
// worker resumes 2.5-5 s later (past its 2 s lease), at most two are
// frozen at once; a killed one is replaced at once. The test's loop calls
// thaw and, once due, inject; thawAll when the faults end.
type faultInjector struct {
	e    *faultEnv
	opts faultWorkerOpts
	rng  *rand.Rand
	live []*workerProc

	stopped []frozenWorker
	round   []int
	next    time.Time

	kills, stops, terminations, sessionsTerminated int64
}

// frozenWorker is a SIGSTOPped worker and when it resumes.
type frozenWorker struct {
	w     *workerProc
	until time.Time
}

func newFaultInjector(e *faultEnv, opts faultWorkerOpts, rng *rand.Rand, live []*workerProc) *faultInjector {
	return &faultInjector{e: e, opts: opts, rng: rng, live: live, next: time.Now()}
}

// thaw resumes the frozen workers whose time is up.
func (f *faultInjector) thaw(now time.Time) {
	f.stopped = slices.DeleteFunc(f.stopped, func(s frozenWorker) bool {
		if now.Before(s.until) {
			return false
		}
		if err := s.w.signal(syscall.SIGCONT); err != nil {
			f.e.t.Fatal(err)
		}
		return true
	})
}

// due reports whether the next fault is due.
func (f *faultInjector) due(now time.Time) bool { return !now.Before(f.next) }

// inject causes the next fault of the round and sets when the one after
// is due.
func (f *faultInjector) inject() {
	t := f.e.t
	if len(f.round) == 0 {
		f.round = f.rng.Perm(3)
	}
	kind := f.round[0]
	f.round = f.round[1:]
	if kind == 1 && len(f.stopped) >= 2 {
		kind = 2 // at most two frozen at once
	}
	switch kind {
	case 0:
		i := f.rng.IntN(len(f.live))
		victim := f.live[i]
		if err := victim.signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-victim.exited
		f.kills++
		f.stopped = slices.DeleteFunc(f.stopped, func(s frozenWorker) bool { return s.w == victim })
		f.live[i] = f.e.startReplacement(f.opts)
	case 1:
		var candidates []*workerProc
		for _, w := range f.live {
			if !slices.ContainsFunc(f.stopped, func(s frozenWorker) bool { return s.w == w }) {
				candidates = append(candidates, w)
			}
		}
		victim := candidates[f.rng.IntN(len(candidates))]
		if err := victim.signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		f.stops++
		f.stopped = append(f.stopped, frozenWorker{victim, time.Now().Add(2500*time.Millisecond + rand.N(2500*time.Millisecond))})
	case 2:
		f.terminations++
		f.sessionsTerminated += f.e.mustCount(`
			SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
			FROM pg_stat_activity WHERE application_name LIKE $1 AND random() < 0.5`, faultAppPrefix+"%")
	}
	f.next = time.Now().Add(500*time.Millisecond + rand.N(1500*time.Millisecond))
}

// thawAll resumes every frozen worker: the faults are over.
func (f *faultInjector) thawAll() {
	for _, s := range f.stopped {
		if err := s.w.signal(syscall.SIGCONT); err != nil {
			f.e.t.Fatal(err)
		}
	}
	f.stopped = nil
}

// faults is how many faults it caused.
func (f *faultInjector) faults() int64 { return f.kills + f.stops + f.terminations }

// summary is the faults' part of a report line.
func (f *faultInjector) summary(d time.Duration, workers int) string {
	return fmt.Sprintf("%s: sigkill=%d sigstop=%d terminate_rounds=%d sessions_terminated=%d, %d workers",
		d, f.kills, f.stops, f.terminations, f.sessionsTerminated, workers)
}
