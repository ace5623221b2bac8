package pgqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// fakeClock gives the database of pool a clock the test sets: a function
// now() in a schema of its own, found before pg_catalog's by the pools
// clockPool returns. Returns the setter.
func fakeClock(t *testing.T, pool *pgxpool.Pool, start time.Time) func(time.Time) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		CREATE SCHEMA fakeclock;
		CREATE TABLE fakeclock.clock (t timestamptz NOT NULL);
		CREATE FUNCTION fakeclock.now() RETURNS timestamptz LANGUAGE sql STABLE AS 'SELECT t FROM fakeclock.clock'`)
	must(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO fakeclock.clock VALUES ($1)`, start)
	must(t, err)
	return func(at time.Time) {
		t.Helper()
		_, err := pool.Exec(ctx, `UPDATE fakeclock.clock SET t = $1`, at)
		must(t, err)
	}
}

// clockPool returns a pool on pool's database whose sessions read now()
// from the fake clock, named app.
func clockPool(t *testing.T, pool *pgxpool.Pool, app string) *pgxpool.Pool {
	t.Helper()
	cfg := pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["search_path"] = "fakeclock, pg_catalog"
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	must(t, err)
	t.Cleanup(p.Close)
	return p
}

// TestPeriodicDST drives the periodic enqueuer through daylight saving
// changes with the database's clock set by the test, in steps of ten
// minutes, with two leaders racing at every step, and a leader that dies
// at the instant of the change, after inserting its run and before
// committing it, while the other takes over. A job at a wall time the
// change skips runs once at the end of the gap, one at a repeated wall
// time once, and an hourly job every hour of real time.
func TestPeriodicDST(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "periodic runs across DST changes in Berlin and New York with a leader failover")
	for _, tt := range []struct {
		name, zone, nightly string
		from, to            string
		// failover is the instant at which leader A dies.
		failover string
		want     []string
	}{
		{"BerlinSpring", "Europe/Berlin", "0 30 2 * * *", "2026-03-28T20:00:00Z", "2026-03-30T03:00:00Z",
			"2026-03-29T01:00:00Z", []string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"BerlinAutumn", "Europe/Berlin", "0 30 2 * * *", "2026-10-24T20:00:00Z", "2026-10-26T03:00:00Z",
			"2026-10-25T00:30:00Z", []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"NewYorkSpring", "America/New_York", "0 30 2 * * *", "2026-03-07T20:00:00Z", "2026-03-09T08:00:00Z",
			"2026-03-08T07:00:00Z", []string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NewYorkAutumn", "America/New_York", "0 30 1 * * *", "2026-10-31T20:00:00Z", "2026-11-02T08:00:00Z",
			"2026-11-01T05:30:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := newPool(t)
			from, to, failover := mustTime(t, tt.from), mustTime(t, tt.to), mustTime(t, tt.failover)
			setClock := fakeClock(t, pool, from)
			// Leader A's inserts of nightly runs wait on advisory lock 4242 while
			// fakeclock.trap holds a row: the test kills it there.
			_, err := pool.Exec(ctx, `
				CREATE TABLE fakeclock.trap ();
				CREATE FUNCTION public.trap_leader_a() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF current_setting('application_name') = 'leader-a' AND NEW.meta->'periodic'->>'name' = 'nightly' AND EXISTS (SELECT FROM fakeclock.trap) THEN
						PERFORM pg_advisory_lock(4242);
						PERFORM pg_advisory_unlock(4242);
					END IF;
					RETURN NEW;
				END $$;
				CREATE TRIGGER trap_leader_a BEFORE INSERT ON pgqueue.jobs FOR EACH ROW EXECUTE FUNCTION public.trap_leader_a();`)
			must(t, err)

			nightly, err := pgqueue.CronSchedule("CRON_TZ=" + tt.zone + " " + tt.nightly)
			must(t, err)
			hourly, err := pgqueue.CronSchedule("CRON_TZ=" + tt.zone + " @hourly")
			must(t, err)
			// Steps of ten minutes are late by up to that: not missed.
			opts := &pgqueue.PeriodicJobOpts{MissedAfter: time.Hour}
			leader := func(app string) *pgqueue.Client {
				return newClient(t, clockPool(t, pool, app), &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{
					noteJob("nightly", nightly, opts), noteJob("hourly", hourly, opts),
				}})
			}
			a, b := leader("leader-a"), leader("leader-b")
			race := func() {
				var wg sync.WaitGroup
				wg.Go(func() { pgqueue.PeriodicPass(ctx, a, 1) })
				wg.Go(func() { pgqueue.PeriodicPass(ctx, b, 2) })
				wg.Wait()
			}

			for at := from; !at.After(to); at = at.Add(10 * time.Minute) {
				setClock(at)
				if !at.Equal(failover) {
					race()
					continue
				}
				// A dies at the instant: its run inserted, not committed.
				holder, err := pool.Acquire(ctx)
				must(t, err)
				_, err = holder.Exec(ctx, `SELECT pg_advisory_lock(4242); INSERT INTO fakeclock.trap DEFAULT VALUES`)
				must(t, err)
				done := make(chan struct{})
				go func() {
					defer close(done)
					pgqueue.PeriodicPass(ctx, a, 1)
				}()
				var pid int32
				returned := false
				waitFor(t, "leader A to wait inside its insert", func() bool {
					err := pool.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
						WHERE datname = current_database() AND application_name = 'leader-a' AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&pid)
					must(t, err)
					select {
					case <-done:
						returned = true
					default:
					}
					return pid != 0 || returned
				})
				if pid == 0 {
					holder.Release()
					t.Fatalf("leader A inserted no nightly run at %s", failover)
				}
				// B leads too while A holds the job's row: it must
				// leave the row to A for now.
				pgqueue.PeriodicPass(ctx, b, 2)
				if n := countJobs(t, pool, "meta->'periodic'->>'name' = 'nightly' AND meta->'periodic'->>'instant' = $1", failover.UTC().Format(time.RFC3339Nano)); n != 0 {
					t.Fatalf("%d runs of %s committed while leader A held the row", n, failover)
				}
				_, err = pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
				must(t, err)
				<-done
				_, err = holder.Exec(ctx, `DELETE FROM fakeclock.trap; SELECT pg_advisory_unlock(4242)`)
				must(t, err)
				holder.Release()
				// B takes over at the same instant; A, back, finds it done.
				pgqueue.PeriodicPass(ctx, b, 2)
				pgqueue.PeriodicPass(ctx, a, 1)
				race()
			}

			runs := periodicRuns(t, pool, "nightly")
			var got []string
			for _, r := range runs {
				got = append(got, r.instant.UTC().Format(time.RFC3339))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("nightly runs at %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("nightly runs at %v, want %v", got, tt.want)
				}
			}
			// Hourly: every hour of real time, once, across the change.
			hours := checkInstantsOnce(t, pool, "hourly", time.Hour)
			if wantHours := int(to.Sub(from.Truncate(time.Hour)) / time.Hour); len(hours) != wantHours {
				t.Errorf("%d hourly runs between %s and %s, want %d", len(hours), from, to, wantHours)
			}
		})
	}
}
