package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// activityEvery is how often a sustained run looks for autovacuum and the
// pruner at work.
const activityEvery = 250 * time.Millisecond

// activity is what ran beside a sustained load, by second of the run:
// whether an autovacuum worker was on the jobs table and whether a pruner
// batch was in flight at any of that second's samples.
type activity struct {
	start time.Time
	mu    sync.Mutex
	// vacuum and prune by second of the run
	vacuum, prune []bool

	quit, done chan struct{}
}

// watchActivity samples pg_stat_activity from a connection of its own until
// stop.
func watchActivity(ctx context.Context, cfg *Config, start time.Time) (*activity, error) {
	q, err := cfg.queries()
	if err != nil {
		return nil, err
	}
	cc := cfg.Pool.Config().ConnConfig.Copy()
	cc.Tracer = nil
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	a := &activity{start: start, quit: make(chan struct{}), done: make(chan struct{})}
	table := cfg.schema() + ".jobs"
	go func() {
		defer close(a.done)
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		t := time.NewTicker(activityEvery)
		defer t.Stop()
		for {
			select {
			case <-a.quit:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				var vacuum, prune bool
				if conn.QueryRow(ctx, q.activity, table).Scan(&vacuum, &prune) == nil {
					a.record(now, vacuum, prune)
				}
			}
		}
	}()
	return a, nil
}

func (a *activity) record(at time.Time, vacuum, prune bool) {
	i := max(int(at.Sub(a.start)/time.Second), 0)
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.vacuum) <= i {
		a.vacuum, a.prune = append(a.vacuum, false), append(a.prune, false)
	}
	a.vacuum[i] = a.vacuum[i] || vacuum
	a.prune[i] = a.prune[i] || prune
}

// stop ends the sampling.
func (a *activity) stop() {
	close(a.quit)
	<-a.done
}

// at says what ran in second i of the run.
func (a *activity) at(i int) (vacuum, prune bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i < len(a.vacuum) {
		return a.vacuum[i], a.prune[i]
	}
	return false, false
}

// Attribution is a sustained run's enqueue→start latency split by what ran
// beside it in the second the jobs started.
type Attribution struct {
	// Start is the run's start, by this machine's clock, to match the
	// server's log.
	Start time.Time
	// Groups: seconds with autovacuum on the jobs table, with a pruner
	// batch, with both, with neither; Warm the same from the second
	// minute on, without the first minute's warm-up.
	Groups, Warm []AttributionGroup
	// Slow are the seconds whose p99 passed SlowP99, in time order;
	// SlowShown of them are listed by String, the worst.
	Slow []SlowSecond
}

// SlowShown is how many of the slow seconds a report lists.
const SlowShown = 20

// SlowP99 is the p99 above which a second of a sustained run is listed.
const SlowP99 = 25 * time.Millisecond

// AttributionGroup is the jobs that started in the seconds of one kind.
type AttributionGroup struct {
	Name          string
	Seconds, Jobs int
	P50, P99, Max time.Duration
}

// SlowSecond is one second of the run whose p99 passed SlowP99.
type SlowSecond struct {
	At            time.Duration // from the run's start
	Jobs          int
	P99, Max      time.Duration
	Vacuum, Prune bool
	// Claims is how many claims ended in that second, ClaimMax the
	// slowest.
	Claims   int
	ClaimMax time.Duration
}

// attribute splits the per-second latencies by the activity seen.
func attribute(a *activity, bySecond, claimsBySecond [][]time.Duration) Attribution {
	out := Attribution{Start: a.start}
	out.Groups = attributionGroups(a, bySecond, 0)
	out.Warm = attributionGroups(a, bySecond, 60)
	for i, ds := range bySecond {
		v, p := a.at(i)
		if p99 := quantile(ds, 0.99); p99 > SlowP99 {
			s := SlowSecond{At: time.Duration(i) * time.Second, Jobs: len(ds), P99: p99, Max: quantile(ds, 1), Vacuum: v, Prune: p}
			if i < len(claimsBySecond) {
				s.Claims, s.ClaimMax = len(claimsBySecond[i]), quantile(claimsBySecond[i], 1)
			}
			out.Slow = append(out.Slow, s)
		}
	}
	return out
}

// attributionGroups pools the latencies of the seconds from second from
// on by what ran beside them.
func attributionGroups(a *activity, bySecond [][]time.Duration, from int) []AttributionGroup {
	groups := map[string][]time.Duration{}
	seconds := map[string]int{}
	for i := from; i < len(bySecond); i++ {
		v, p := a.at(i)
		name := "neither"
		switch {
		case v && p:
			name = "autovacuum and pruner"
		case v:
			name = "autovacuum on jobs"
		case p:
			name = "pruner"
		}
		groups[name] = append(groups[name], bySecond[i]...)
		seconds[name]++
	}
	var out []AttributionGroup
	for _, name := range []string{"neither", "pruner", "autovacuum on jobs", "autovacuum and pruner"} {
		ds := groups[name]
		slices.Sort(ds)
		out = append(out, AttributionGroup{Name: name, Seconds: seconds[name], Jobs: len(ds),
			P50: quantile(ds, 0.5), P99: quantile(ds, 0.99), Max: quantile(ds, 1)})
	}
	return out
}

func (a Attribution) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "by what ran beside it (pg_stat_activity every %s; run started %s UTC):\n", activityEvery, a.Start.UTC().Format("15:04:05"))
	fmt.Fprintf(&b, "%-22s %8s %9s %10s %10s %10s\n", "seconds with", "seconds", "jobs", "p50", "p99", "max")
	for _, g := range a.Groups {
		fmt.Fprintf(&b, "%-22s %8d %9d %10s %10s %10s\n", g.Name, g.Seconds, g.Jobs, round(g.P50), round(g.P99), round(g.Max))
	}
	b.WriteString("the same from the second minute on:\n")
	for _, g := range a.Warm {
		fmt.Fprintf(&b, "%-22s %8d %9d %10s %10s %10s\n", g.Name, g.Seconds, g.Jobs, round(g.P50), round(g.P99), round(g.Max))
	}
	fmt.Fprintf(&b, "seconds with p99 over %s: %d", SlowP99, len(a.Slow))
	shown := a.Slow
	if len(shown) > SlowShown {
		fmt.Fprintf(&b, "; the %d worst:", SlowShown)
		shown = slices.Clone(shown)
		slices.SortFunc(shown, func(x, y SlowSecond) int { return cmp.Compare(y.P99, x.P99) })
		shown = shown[:SlowShown]
		slices.SortFunc(shown, func(x, y SlowSecond) int { return cmp.Compare(x.At, y.At) })
	}
	for _, s := range shown {
		var with []string
		if s.Vacuum {
			with = append(with, "autovacuum")
		}
		if s.Prune {
			with = append(with, "pruner")
		}
		fmt.Fprintf(&b, "\n  %s (%s UTC): %d jobs, p99 %s, max %s; %d claims, slowest %s; %s", s.At, a.Start.Add(s.At).UTC().Format("15:04:05"),
			s.Jobs, round(s.P99), round(s.Max), s.Claims, round(s.ClaimMax), cmp.Or(strings.Join(with, ", "), "neither"))
	}
	return b.String()
}
