package pgqueue_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// reportArgs declares defaults for every insert option it sets.
type reportArgs struct {
	Day string `json:"day"`
}

func (reportArgs) Kind() string { return "report" }

func (reportArgs) EnqueueOpts() pgqueue.EnqueueOpts {
	return pgqueue.EnqueueOpts{
		Queue:       "reports",
		Priority:    3,
		MaxAttempts: 7,
		Tags:        []string{"nightly"},
		Meta:        map[string]any{"team": "finance", "level": "default"},
		Unique:      &pgqueue.UniqueOpts{ByArgs: true},
	}
}

// bulkArgs declares defaults, none of them unique, so EnqueueMany can COPY
// it.
type bulkArgs struct {
	N int `json:"n"`
}

func (bulkArgs) Kind() string { return "bulk" }

func (bulkArgs) EnqueueOpts() pgqueue.EnqueueOpts {
	return pgqueue.EnqueueOpts{Queue: "bulk", Priority: 2, MaxAttempts: 4, Tags: []string{"bulk"}}
}

// storedOpts are a job's options as stored.
type storedOpts struct {
	queue       string
	priority    int16
	maxAttempts int
	tags        []string
	team, level string
}

func readOpts(t *testing.T, pool *pgxpool.Pool, id int64) storedOpts {
	t.Helper()
	var o storedOpts
	must(t, pool.QueryRow(context.Background(), `
		SELECT queue, priority, max_attempts, tags, coalesce(meta->>'team', ''), coalesce(meta->>'level', '')
		FROM pgqueue.jobs WHERE id = $1`, id).Scan(&o.queue, &o.priority, &o.maxAttempts, &o.tags, &o.team, &o.level))
	return o
}

// TestArgsInsertOptsDefaults checks that an args type's declared options
// are the defaults of every insert path, overridden field by field by the
// caller's.
func TestArgsInsertOptsDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	defaults := storedOpts{queue: "reports", priority: 3, maxAttempts: 7, tags: []string{"nightly"}, team: "finance", level: "default"}
	equal := func(a, b storedOpts) bool {
		return a.queue == b.queue && a.priority == b.priority && a.maxAttempts == b.maxAttempts &&
			slices.Equal(a.tags, b.tags) && a.team == b.team && a.level == b.level
	}

	t.Run("Enqueue", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, reportArgs{Day: "mon"}, nil)
		must(t, err)
		if got := readOpts(t, pool, res.ID); !equal(got, defaults) {
			t.Fatalf("stored %+v, want the args type's %+v", got, defaults)
		}
		// The default Unique (by args) applies.
		dup, err := c.Enqueue(ctx, reportArgs{Day: "mon"}, &pgqueue.EnqueueOpts{Tags: []string{"other"}})
		must(t, err)
		if !dup.Duplicate || dup.ID != res.ID {
			t.Fatalf("second equal report not a duplicate: %+v", dup)
		}
	})

	t.Run("CallerOverridesFieldByField", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		first, err := c.Enqueue(ctx, reportArgs{Day: "tue"}, nil)
		must(t, err)
		// Unique by key instead: a different key, so not a duplicate of
		// first although the args are equal.
		res, err := c.Enqueue(ctx, reportArgs{Day: "tue"}, &pgqueue.EnqueueOpts{
			Queue: "urgent", Priority: 1, MaxAttempts: 2, Tags: []string{"manual"},
			Meta: map[string]any{"level": "caller"}, Unique: &pgqueue.UniqueOpts{ByKey: "once"},
		})
		must(t, err)
		if res.Duplicate || res.ID == first.ID {
			t.Fatal("the caller's Unique did not replace the default")
		}
		want := storedOpts{queue: "urgent", priority: 1, maxAttempts: 2, tags: []string{"manual"}, team: "finance", level: "caller"}
		if got := readOpts(t, pool, res.ID); !equal(got, want) {
			t.Fatalf("stored %+v, want %+v", got, want)
		}
		// Fields the caller leaves zero keep the defaults.
		res, err = c.Enqueue(ctx, reportArgs{Day: "wed"}, &pgqueue.EnqueueOpts{Priority: 9})
		must(t, err)
		want = defaults
		want.priority = 9
		if got := readOpts(t, pool, res.ID); !equal(got, want) {
			t.Fatalf("stored %+v, want %+v", got, want)
		}
	})

	t.Run("EnqueueMany", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		// Unique by default: the statement path, the duplicate skipped.
		res, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{
			{Args: reportArgs{Day: "thu"}},
			{Args: reportArgs{Day: "thu"}},
			{Args: reportArgs{Day: "fri"}, Opts: &pgqueue.EnqueueOpts{Queue: "urgent"}},
			{Args: noteArgs{}},
		})
		must(t, err)
		if res.Enqueued != 3 || !slices.Equal(res.Duplicates, []int{1}) {
			t.Fatalf("result %+v", res)
		}
		if n := countJobs(t, pool, "kind = 'report' AND queue = 'reports' AND priority = 3 AND max_attempts = 7"); n != 1 {
			t.Fatalf("%d reports with the defaults, want 1", n)
		}
		if n := countJobs(t, pool, "kind = 'report' AND queue = 'urgent' AND priority = 3"); n != 1 {
			t.Fatalf("%d reports with the caller's queue, want 1", n)
		}
		if n := countJobs(t, pool, "kind = 'note' AND queue = 'default' AND priority = 0"); n != 1 {
			t.Fatalf("a kind without defaults got some")
		}

		// COPY, some scheduled by the caller.
		params := make([]pgqueue.EnqueueManyParams, pgqueue.CopyThreshold)
		for i := range params {
			params[i] = pgqueue.EnqueueManyParams{Args: bulkArgs{N: i}}
			if i%2 == 0 {
				params[i].Opts = &pgqueue.EnqueueOpts{Priority: 5, RunAt: time.Now().Add(time.Hour)}
			}
		}
		copied, err := c.EnqueueMany(ctx, params)
		must(t, err)
		if copied.Enqueued != int64(len(params)) {
			t.Fatalf("copied %d", copied.Enqueued)
		}
		half := len(params) / 2
		if n := countJobs(t, pool, "kind = 'bulk' AND queue = 'bulk' AND max_attempts = 4 AND tags = '{bulk}' AND priority = 5 AND state = 'scheduled'"); n != half {
			t.Fatalf("%d scheduled bulk jobs with defaults and the caller's priority, want %d", n, half)
		}
		if n := countJobs(t, pool, "kind = 'bulk' AND queue = 'bulk' AND max_attempts = 4 AND tags = '{bulk}' AND priority = 2 AND state = 'available'"); n != half {
			t.Fatalf("%d available bulk jobs with the defaults, want %d", n, half)
		}
	})

	t.Run("PeriodicRuns", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		job := pgqueue.NewPeriodicJob("reports", pgqueue.EverySchedule(time.Hour), func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
			return reportArgs{Day: "sat"}, &pgqueue.EnqueueOpts{Priority: 4}
		}, &pgqueue.PeriodicJobOpts{RunOnStart: true})
		startClient(t, pool, noteWorkers(t), &pgqueue.Config{PeriodicJobs: []*pgqueue.PeriodicJob{job}})
		waitFor(t, "the run on start", func() bool { return countJobs(t, pool, "kind = 'report'") == 1 })
		var id int64
		must(t, pool.QueryRow(ctx, "SELECT id FROM pgqueue.jobs WHERE kind = 'report'").Scan(&id))
		want := defaults
		want.priority = 4
		if got := readOpts(t, pool, id); !equal(got, want) {
			t.Fatalf("stored %+v, want %+v", got, want)
		}
		// The periodic mark joins the default meta.
		if n := countJobs(t, pool, "id = $1 AND meta->'periodic'->>'name' = 'reports'", id); n != 1 {
			t.Fatal("periodic mark missing")
		}
	})
}
