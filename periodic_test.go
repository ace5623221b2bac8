package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// periodicRun is a job a periodic job enqueued, as its Meta records it.
type periodicRun struct {
	id      int64
	instant time.Time
	run     string
}

// periodicRuns returns the jobs periodic job name enqueued, by instant.
func periodicRuns(t *testing.T, pool *pgxpool.Pool, name string) []periodicRun {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT id, (meta->'periodic'->>'instant')::timestamptz, meta->'periodic'->>'run'
		FROM pgqueue.jobs WHERE meta->'periodic'->>'name' = $1
		ORDER BY 2, 1`, name)
	must(t, err)
	var out []periodicRun
	var r periodicRun
	_, err = pgx.ForEachRow(rows, []any{&r.id, &r.instant, &r.run}, func() error {
		out = append(out, r)
		return nil
	})
	must(t, err)
	return out
}

// checkInstantsOnce fails the test unless the scheduled runs of job name
// are at distinct instants, one period apart, with nothing missing.
func checkInstantsOnce(t *testing.T, pool *pgxpool.Pool, name string, period time.Duration) []periodicRun {
	t.Helper()
	runs := periodicRuns(t, pool, name)
	for i := 1; i < len(runs); i++ {
		if d := runs[i].instant.Sub(runs[i-1].instant); d != period {
			t.Errorf("runs %d and %d of %s: instants %s and %s, %s apart, want %s", runs[i-1].id, runs[i].id, name, runs[i-1].instant, runs[i].instant, d, period)
		}
	}
	return runs
}

// waitRuns waits until periodic job name enqueued at least n jobs.
func waitRuns(t *testing.T, pool *pgxpool.Pool, name string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d runs of %s", n, name), func() bool {
		return countJobs(t, pool, "meta->'periodic'->>'name' = $1", name) >= n
	})
}

// noteWorkers completes note jobs.
func noteWorkers(t *testing.T) *pgqueue.Workers {
	t.Helper()
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(context.Context, *pgqueue.Job[noteArgs]) error { return nil }, nil))
	return ws
}

func noteJob(name string, s pgqueue.PeriodicSchedule, opts *pgqueue.PeriodicJobOpts) *pgqueue.PeriodicJob {
	return pgqueue.NewPeriodicJob(name, s, func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
		return noteArgs{N: 1}, &pgqueue.EnqueueOpts{Tags: []string{"periodic"}, Meta: map[string]any{"own": "kept"}}
	}, opts)
}

// recordInstant records, before any client looks, that job name is done up
// to the instant the SQL expression at gives.
func recordInstant(t *testing.T, pool *pgxpool.Pool, name, at string) time.Time {
	t.Helper()
	var last time.Time
	must(t, pool.QueryRow(context.Background(), `
		INSERT INTO pgqueue.periodic_jobs (name, last_instant) VALUES ($1, `+at+`) RETURNING last_instant`, name).Scan(&last))
	return last
}

func TestPeriodicJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("InvalidJobsRefused", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		ok := pgqueue.EverySchedule(time.Minute)
		ctor := func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) { return noteArgs{}, nil }
		for name, jobs := range map[string][]*pgqueue.PeriodicJob{
			"nil job":           {nil},
			"empty name":        {pgqueue.NewPeriodicJob("", ok, ctor, nil)},
			"long name":         {pgqueue.NewPeriodicJob(string(make([]byte, 256)), ok, ctor, nil)},
			"nil schedule":      {pgqueue.NewPeriodicJob("a", nil, ctor, nil)},
			"short interval":    {pgqueue.NewPeriodicJob("a", pgqueue.EverySchedule(time.Millisecond), ctor, nil)},
			"nil constructor":   {pgqueue.NewPeriodicJob("a", ok, nil, nil)},
			"unknown policy":    {pgqueue.NewPeriodicJob("a", ok, ctor, &pgqueue.PeriodicJobOpts{Missed: 7})},
			"negative MissedAf": {pgqueue.NewPeriodicJob("a", ok, ctor, &pgqueue.PeriodicJobOpts{MissedAfter: -time.Second})},
		} {
			if _, err := pgqueue.New(pool, &pgqueue.Config{PeriodicJobs: jobs}); !errors.Is(err, pgqueue.ErrInvalid) {
				t.Errorf("%s: New returned %v, want ErrInvalid", name, err)
			}
		}
		_, err := pgqueue.New(pool, &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{pgqueue.NewPeriodicJob("a", pgqueue.EverySchedule(time.Millisecond), ctor, nil)}})
		if se := (*pgqueue.ScheduleError)(nil); !errors.As(err, &se) || se.Expr != "@every 1ms" {
			t.Errorf("short interval: %v, want a *ScheduleError for @every 1ms", err)
		}
		twice := []*pgqueue.PeriodicJob{pgqueue.NewPeriodicJob("a", ok, ctor, nil), pgqueue.NewPeriodicJob("a", ok, ctor, nil)}
		if _, err := pgqueue.New(pool, &pgqueue.Config{PeriodicJobs: twice}); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Errorf("same name twice: New returned %v, want ErrInvalid", err)
		}
		c := newClient(t, pool, &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{pgqueue.NewPeriodicJob("a", ok, ctor, nil)}})
		if err := c.PeriodicJobs().Add(pgqueue.NewPeriodicJob("a", ok, ctor, nil)); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Errorf("Add of a taken name: %v, want ErrInvalid", err)
		}
	})

	t.Run("EachInstantOnceWithItsMark", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "each periodic instant enqueued once with its mark")
		pool := newPool(t)
		job := noteJob("every-second", pgqueue.EverySchedule(time.Second), nil)
		startClient(t, pool, noteWorkers(t), &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{job}})
		waitRuns(t, pool, "every-second", 3)
		runs := checkInstantsOnce(t, pool, "every-second", time.Second)
		var first time.Time
		must(t, pool.QueryRow(ctx, `SELECT created_at FROM pgqueue.periodic_jobs WHERE name = 'every-second'`).Scan(&first))
		for _, r := range runs {
			if r.run != "scheduled" || !r.instant.Truncate(time.Second).Equal(r.instant) || !r.instant.After(first) {
				t.Errorf("run %+v: want a scheduled run at a whole second after the job was first seen (%s)", r, first)
			}
		}
		// The run is the constructor's job, marked; and it is worked.
		var tags []string
		var own string
		must(t, pool.QueryRow(ctx, `SELECT tags, meta->>'own' FROM pgqueue.jobs WHERE id = $1`, runs[0].id).Scan(&tags, &own))
		if len(tags) != 1 || tags[0] != "periodic" || own != "kept" {
			t.Errorf("tags %v, meta own %q: the constructor's options were not kept", tags, own)
		}
		waitState(t, pool, runs[0].id, "completed")
		// The table records the last instant enqueued, or one later.
		var last time.Time
		must(t, pool.QueryRow(ctx, `SELECT last_instant FROM pgqueue.periodic_jobs WHERE name = 'every-second'`).Scan(&last))
		if last.Before(runs[len(runs)-1].instant) {
			t.Errorf("last_instant %s before the last run's instant %s", last, runs[len(runs)-1].instant)
		}
		// For operators: the schedule's text and an instant after the
		// last one done.
		var schedule string
		var next, done time.Time
		must(t, pool.QueryRow(ctx, `SELECT schedule, next_at, last_instant FROM pgqueue.periodic_jobs WHERE name = 'every-second'`).Scan(&schedule, &next, &done))
		if schedule != "@every 1s" || !next.After(done) || next.Sub(done) > time.Second {
			t.Errorf("schedule %q next %s after last %s", schedule, next, done)
		}
	})

	t.Run("FirstSightNoBackfill", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "no backfill of the instants before a periodic job was first seen")
		pool := newPool(t)
		hourly, err := pgqueue.CronSchedule("0 * * * *")
		must(t, err)
		startClient(t, pool, noteWorkers(t), &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{noteJob("hourly", hourly, nil)}})
		waitFor(t, "the row of the new job", func() bool {
			var n int
			must(t, pool.QueryRow(ctx, `SELECT count(*) FROM pgqueue.periodic_jobs WHERE name = 'hourly' AND last_instant <= now() AND last_instant > now() - interval '1 minute'`).Scan(&n))
			return n == 1
		})
		time.Sleep(200 * time.Millisecond)
		if runs := periodicRuns(t, pool, "hourly"); len(runs) != 0 {
			t.Fatalf("runs %v before the first instant", runs)
		}
	})

	t.Run("RunOnStartOncePerTerm", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "RunOnStart once per leadership term")
		pool := newPool(t)
		hourly, err := pgqueue.CronSchedule("@hourly")
		must(t, err)
		job := noteJob("on-start", hourly, &pgqueue.PeriodicJobOpts{RunOnStart: true})
		cfg := func() *pgqueue.Config { return &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{job}} }
		b := startClient(t, pool, noteWorkers(t), cfg())
		waitRuns(t, pool, "on-start", 1)
		// Removed and added again in the same term: no second run.
		b.client.PeriodicJobs().Remove("on-start")
		must(t, b.client.PeriodicJobs().Add(job))
		time.Sleep(300 * time.Millisecond)
		if n := len(periodicRuns(t, pool, "on-start")); n != 1 {
			t.Fatalf("%d runs in the first term, want 1", n)
		}
		must(t, b.client.Stop(ctx))
		// The next leader (term) runs it once more.
		startClient(t, pool, noteWorkers(t), cfg())
		waitRuns(t, pool, "on-start", 2)
		time.Sleep(300 * time.Millisecond)
		runs := periodicRuns(t, pool, "on-start")
		if len(runs) != 2 || runs[0].run != "start" || runs[1].run != "start" {
			t.Fatalf("runs %+v, want two start runs", runs)
		}
		var startTerm, leaseFence int64
		must(t, pool.QueryRow(ctx, `SELECT start_term, (SELECT fence FROM pgqueue.leases WHERE name = 'pgqueue:maintenance') FROM pgqueue.periodic_jobs WHERE name = 'on-start'`).Scan(&startTerm, &leaseFence))
		if startTerm != leaseFence {
			t.Errorf("start_term %d, want the leader's term %d", startTerm, leaseFence)
		}
	})

	t.Run("LateInstantsWithinMissedAfterAreEachEnqueued", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "late instants within MissedAfter each enqueued")
		pool := newPool(t)
		last := recordInstant(t, pool, "late", `to_timestamp(floor(extract(epoch FROM now())) - 5)`)
		startClient(t, pool, noteWorkers(t), &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{noteJob("late", pgqueue.EverySchedule(time.Second), nil)}})
		waitRuns(t, pool, "late", 6)
		runs := checkInstantsOnce(t, pool, "late", time.Second)
		if !runs[0].instant.Equal(last.Add(time.Second)) {
			t.Errorf("first run at %s, want the instant after the recorded one, %s", runs[0].instant, last.Add(time.Second))
		}
	})

	for _, tt := range []struct {
		name   string
		missed pgqueue.MissedPolicy
		want   int
	}{{"AfterDowntimeSkipsMissed", pgqueue.MissedSkip, 0}, {"AfterDowntimeCatchesUpOnce", pgqueue.MissedCatchUp, 1}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			// Done up to five hours ago: the hours since are missed.
			recordInstant(t, pool, "hourly", `to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600 - 5 * 3600)`)
			job := noteJob("hourly", pgqueue.EverySchedule(time.Hour), &pgqueue.PeriodicJobOpts{Missed: tt.missed, MissedAfter: time.Microsecond})
			startClient(t, pool, noteWorkers(t), &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{job}})
			var last time.Time
			waitFor(t, "the missed instants to be done", func() bool {
				must(t, pool.QueryRow(ctx, `SELECT last_instant FROM pgqueue.periodic_jobs WHERE name = 'hourly'`).Scan(&last))
				return time.Since(last) < time.Hour+time.Minute
			})
			time.Sleep(200 * time.Millisecond)
			runs := periodicRuns(t, pool, "hourly")
			if len(runs) != tt.want {
				t.Fatalf("runs %+v, want %d", runs, tt.want)
			}
			if tt.want == 1 && (runs[0].run != "catch_up" || !runs[0].instant.Equal(last)) {
				t.Errorf("run %+v, want a catch_up run for the latest missed instant %s", runs[0], last)
			}
			if !last.Truncate(time.Hour).Equal(last) {
				t.Errorf("last_instant %s is not an instant of the schedule", last)
			}
		})
	}

	t.Run("AddAndRemoveWhileRunning", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "periodic jobs added and removed while the client runs")
		pool := newPool(t)
		b := startClient(t, pool, noteWorkers(t), nil)
		jobs := b.client.PeriodicJobs()
		must(t, jobs.Add(noteJob("added", pgqueue.EverySchedule(time.Second), nil)))
		waitRuns(t, pool, "added", 2)

		// Many goroutines change the set while the leader reads it.
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				name := fmt.Sprintf("churn-%d", g)
				for range 50 {
					if err := jobs.Add(noteJob(name, pgqueue.EverySchedule(time.Hour), nil)); err != nil {
						t.Error(err)
						return
					}
					_ = jobs.Names()
					if !jobs.Remove(name) {
						t.Errorf("%s was not there to remove", name)
						return
					}
				}
			})
		}
		wg.Wait()
		if names := jobs.Names(); len(names) != 1 || names[0] != "added" {
			t.Fatalf("names %v, want [added]", names)
		}

		if !jobs.Remove("added") || jobs.Remove("added") {
			t.Fatal("Remove reported wrongly")
		}
		// A run in flight when Remove returned may still commit.
		time.Sleep(500 * time.Millisecond)
		n := len(periodicRuns(t, pool, "added"))
		time.Sleep(2 * time.Second)
		if after := len(periodicRuns(t, pool, "added")); after != n {
			t.Fatalf("%d runs after Remove, want none", after-n)
		}
		checkInstantsOnce(t, pool, "added", time.Second)
	})

	t.Run("ConstructorSkipsAndInvalidRuns", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "periodic constructors that skip a run or return an invalid one")
		pool := newPool(t)
		var mu sync.Mutex
		calls := 0
		job := pgqueue.NewPeriodicJob("picky", pgqueue.EverySchedule(time.Second), func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
			mu.Lock()
			defer mu.Unlock()
			calls++
			switch calls % 3 {
			case 1:
				return nil, nil // skip this run
			case 2:
				return noteArgs{}, &pgqueue.EnqueueOpts{Queue: "Not A Queue"} // invalid: skipped too
			}
			return noteArgs{N: calls}, nil
		}, nil)
		startClient(t, pool, noteWorkers(t), &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{job}})
		waitRuns(t, pool, "picky", 2)
		runs := periodicRuns(t, pool, "picky")
		if d := runs[1].instant.Sub(runs[0].instant); d != 3*time.Second {
			t.Errorf("runs %s apart, want 3s: the skipped instants are done, not retried", d)
		}
	})
}

// TestPeriodicLeader checks that only the maintenance leader enqueues
// periodic jobs, and that leaders racing (as when one is paused past its
// term) never enqueue an instant twice.
func TestPeriodicLeader(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "periodic runs enqueued by the leader only, and once by racing leaders")
	ctx := context.Background()

	t.Run("OnlyTheLeaderEnqueues", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		// Every insert records the session's application_name.
		_, err := pool.Exec(ctx, `
			CREATE TABLE inserted_by (job_id bigint, app text);
			CREATE FUNCTION note_inserter() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				INSERT INTO inserted_by VALUES (NEW.id, current_setting('application_name'));
				RETURN NULL;
			END $$;
			CREATE TRIGGER note_inserter AFTER INSERT ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION note_inserter();`)
		must(t, err)
		for _, id := range []string{"client-a", "client-b"} {
			cfg := pool.Config().Copy()
			cfg.ConnConfig.RuntimeParams["application_name"] = id
			p, err := pgxpool.NewWithConfig(ctx, cfg)
			must(t, err)
			t.Cleanup(p.Close)
			job := noteJob("shared", pgqueue.EverySchedule(time.Second), nil)
			startClient(t, p, noteWorkers(t), &pgqueue.Config{ID: id, PeriodicJobs: []*pgqueue.PeriodicJob{job}})
		}
		waitRuns(t, pool, "shared", 4)
		checkInstantsOnce(t, pool, "shared", time.Second)
		var apps []string
		var leader string
		must(t, pool.QueryRow(ctx, `
			SELECT array_agg(DISTINCT i.app), (SELECT holder FROM pgqueue.leases WHERE name = 'pgqueue:maintenance')
			FROM inserted_by i JOIN pgqueue.jobs j ON j.id = i.job_id
			WHERE j.meta->'periodic'->>'name' = 'shared'`).Scan(&apps, &leader))
		if len(apps) != 1 || apps[0] != leader {
			t.Fatalf("runs inserted by %v, want by the leader %s alone", apps, leader)
		}
	})

	t.Run("RacingLeadersEnqueueEachInstantOnce", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		recordInstant(t, pool, "raced", `to_timestamp(floor(extract(epoch FROM now())) - 30)`)
		// Two clients that never start: each pass acts as a leader would,
		// in terms that overlap, from many goroutines at once.
		var clients []*pgqueue.Client
		for range 2 {
			clients = append(clients, newClient(t, pool, &pgqueue.Config{
				PeriodicJobs: []*pgqueue.PeriodicJob{noteJob("raced", pgqueue.EverySchedule(time.Second), &pgqueue.PeriodicJobOpts{RunOnStart: true})},
			}))
		}
		deadline := time.Now().Add(3 * time.Second)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				c, term := clients[g%2], int64(g%2+1)
				for time.Now().Before(deadline) {
					pgqueue.PeriodicPass(ctx, c, term)
				}
			})
		}
		wg.Wait()
		var scheduled []periodicRun
		starts := 0
		for _, r := range periodicRuns(t, pool, "raced") {
			if r.run == "start" {
				starts++
			} else {
				scheduled = append(scheduled, r)
			}
		}
		if len(scheduled) < 30 {
			t.Fatalf("%d scheduled runs, want the 30 late instants and those since", len(scheduled))
		}
		for i := 1; i < len(scheduled); i++ {
			if d := scheduled[i].instant.Sub(scheduled[i-1].instant); d != time.Second {
				t.Errorf("instants %s and %s are %s apart, want 1s", scheduled[i-1].instant, scheduled[i].instant, d)
			}
		}
		// Term 1 may run on start before term 2 does; never after, and
		// never twice.
		if starts < 1 || starts > 2 {
			t.Errorf("%d runs on start by terms 1 and 2, want 1 or 2", starts)
		}
		var startTerm int64
		must(t, pool.QueryRow(ctx, `SELECT start_term FROM pgqueue.periodic_jobs WHERE name = 'raced'`).Scan(&startTerm))
		if startTerm != 2 {
			t.Errorf("start_term %d, want 2", startTerm)
		}
	})
}
