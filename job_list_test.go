package pgqueue_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

type listAlphaArgs struct {
	Customer int `json:"customer"`
	Order    int `json:"order"`
}

func (listAlphaArgs) Kind() string { return "alpha" }

type listBetaArgs struct {
	Customer int `json:"customer"`
}

func (listBetaArgs) Kind() string { return "beta" }

// listedJob is a fixture job as the test reads it back with its own SQL,
// independently of JobList.
type listedJob struct {
	id                            int64
	queue, kind, state            string
	tags                          []string
	customer                      int
	createdAt, runAt, finalizedAt time.Time
	finalized                     bool
}

// listBundle is a client and the jobs of listFixture.
type listBundle struct {
	pool   *pgxpool.Pool
	client *pgqueue.Client
	jobs   []listedJob
	base   time.Time // the fixture's times are seconds after base
}

// listFixture inserts 40 jobs of three queues, two kinds, every state but
// running, and tags; their times repeat (ties broken by id) and do not
// follow the ids.
func listFixture(t *testing.T) *listBundle {
	t.Helper()
	ctx := context.Background()
	pool := newPool(t)
	b := &listBundle{pool: pool, client: newClient(t, pool, nil), base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	queues := []string{"default", "email", "billing"}
	tags := [][]string{{"urgent"}, {"urgent", "batch"}, {"batch"}, nil}
	var params []pgqueue.EnqueueManyParams
	for i := range 40 {
		var args pgqueue.JobArgs = listAlphaArgs{Customer: i % 4, Order: i}
		if i%2 == 1 {
			args = listBetaArgs{Customer: i % 4}
		}
		params = append(params, pgqueue.EnqueueManyParams{Args: args, Opts: &pgqueue.EnqueueOpts{Queue: queues[i%3], Tags: tags[i%4]}})
	}
	_, err := b.client.EnqueueMany(ctx, params)
	must(t, err)
	// States and times by each job's rank n in id order.
	_, err = pool.Exec(ctx, `
		WITH r AS (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n FROM pgqueue.jobs)
		UPDATE pgqueue.jobs j SET
			state = (ARRAY['completed', 'discarded', 'cancelled', 'scheduled', 'available'])[r.n % 5 + 1],
			created_at = $1::timestamptz + (r.n * 11 % 17) * interval '1 second',
			run_at = $1::timestamptz + (r.n * 3 % 19) * interval '1 second'
				+ CASE WHEN r.n % 5 = 3 THEN interval '100 years' ELSE interval '0' END,
			finalized_at = CASE WHEN r.n % 5 < 3 THEN $1::timestamptz + (r.n * 7 % 13) * interval '1 second' END
		FROM r WHERE j.id = r.id`, b.base)
	must(t, err)
	b.jobs = readListed(t, pool)
	return b
}

func readListed(t *testing.T, pool *pgxpool.Pool) []listedJob {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT id, queue, kind, state, tags, (args->>'customer')::int, created_at, run_at,
			coalesce(finalized_at, 'epoch'), finalized_at IS NOT NULL
		FROM pgqueue.jobs ORDER BY id`)
	must(t, err)
	defer rows.Close()
	var out []listedJob
	for rows.Next() {
		var j listedJob
		must(t, rows.Scan(&j.id, &j.queue, &j.kind, &j.state, &j.tags, &j.customer, &j.createdAt, &j.runAt, &j.finalizedAt, &j.finalized))
		out = append(out, j)
	}
	must(t, rows.Err())
	return out
}

// listAll pages through JobList with params until NextCursor is empty and
// returns the ids in the order returned.
func listAll(t *testing.T, c *pgqueue.Client, params pgqueue.JobListParams) []int64 {
	t.Helper()
	var ids []int64
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("more than 1000 pages")
		}
		res, err := c.JobList(context.Background(), &params)
		must(t, err)
		if len(res.Jobs) > cmp.Or(params.Limit, 100) {
			t.Fatalf("page of %d jobs, limit %d", len(res.Jobs), params.Limit)
		}
		for _, j := range res.Jobs {
			ids = append(ids, j.ID)
		}
		if res.NextCursor == "" {
			return ids
		}
		if len(res.Jobs) == 0 {
			t.Fatal("empty page with a next cursor")
		}
		params.Cursor = res.NextCursor
	}
}

// idsWhere returns the ids of the fixture's jobs that pass keep, by id.
func (b *listBundle) idsWhere(keep func(j listedJob) bool) []int64 {
	var ids []int64
	for _, j := range b.jobs {
		if keep(j) {
			ids = append(ids, j.id)
		}
	}
	return ids
}

func TestJobList(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := listFixture(t)
	if len(b.jobs) != 40 {
		t.Fatalf("fixture has %d jobs", len(b.jobs))
	}
	at := func(s int) time.Time { return b.base.Add(time.Duration(s) * time.Second) }

	t.Run("Filters", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			params pgqueue.JobListParams
			keep   func(j listedJob) bool
		}{
			{"None", pgqueue.JobListParams{}, func(listedJob) bool { return true }},
			{"IDs", pgqueue.JobListParams{IDs: []int64{b.jobs[3].id, b.jobs[17].id, b.jobs[39].id, -5}},
				func(j listedJob) bool { return j.id == b.jobs[3].id || j.id == b.jobs[17].id || j.id == b.jobs[39].id }},
			{"Queues", pgqueue.JobListParams{Queues: []string{"email", "billing", "nope"}},
				func(j listedJob) bool { return j.queue == "email" || j.queue == "billing" }},
			{"Kinds", pgqueue.JobListParams{Kinds: []string{"beta"}}, func(j listedJob) bool { return j.kind == "beta" }},
			{"States", pgqueue.JobListParams{States: []pgqueue.JobState{pgqueue.StateDiscarded, pgqueue.StateScheduled}},
				func(j listedJob) bool { return j.state == "discarded" || j.state == "scheduled" }},
			{"OneState", pgqueue.JobListParams{States: []pgqueue.JobState{pgqueue.StateCancelled}},
				func(j listedJob) bool { return j.state == "cancelled" }},
			{"TagsAll", pgqueue.JobListParams{Tags: []string{"batch", "urgent"}},
				func(j listedJob) bool { return slices.Contains(j.tags, "batch") && slices.Contains(j.tags, "urgent") }},
			{"TagOne", pgqueue.JobListParams{Tags: []string{"urgent"}}, func(j listedJob) bool { return slices.Contains(j.tags, "urgent") }},
			{"CreatedRange", pgqueue.JobListParams{CreatedFrom: at(3), CreatedBefore: at(9)},
				func(j listedJob) bool { return !j.createdAt.Before(at(3)) && j.createdAt.Before(at(9)) }},
			{"CreatedFrom", pgqueue.JobListParams{CreatedFrom: at(10)}, func(j listedJob) bool { return !j.createdAt.Before(at(10)) }},
			{"FinalizedRange", pgqueue.JobListParams{FinalizedFrom: at(2), FinalizedBefore: at(6)},
				func(j listedJob) bool {
					return j.finalized && !j.finalizedAt.Before(at(2)) && j.finalizedAt.Before(at(6))
				}},
			{"FinalizedBefore", pgqueue.JobListParams{FinalizedBefore: at(4)},
				func(j listedJob) bool { return j.finalized && j.finalizedAt.Before(at(4)) }},
			{"ArgsMap", pgqueue.JobListParams{ArgsContain: map[string]any{"customer": 2}}, func(j listedJob) bool { return j.customer == 2 }},
			{"ArgsRaw", pgqueue.JobListParams{ArgsContain: json.RawMessage(`{"customer": 2, "order": 6}`)},
				func(j listedJob) bool { return j.id == b.jobs[6].id }},
			{"ArgsStruct", pgqueue.JobListParams{ArgsContain: listBetaArgs{Customer: 3}}, func(j listedJob) bool { return j.customer == 3 }},
			{"Combined", pgqueue.JobListParams{
				Queues: []string{"default", "email"}, Kinds: []string{"alpha"}, States: []pgqueue.JobState{pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateScheduled},
				Tags: []string{"urgent"}, CreatedBefore: at(15), ArgsContain: map[string]any{"customer": 0},
			}, func(j listedJob) bool {
				return (j.queue == "default" || j.queue == "email") && j.kind == "alpha" &&
					(j.state == "completed" || j.state == "discarded" || j.state == "scheduled") &&
					slices.Contains(j.tags, "urgent") && j.createdAt.Before(at(15)) && j.customer == 0
			}},
			{"MatchesNothing", pgqueue.JobListParams{Queues: []string{"nope"}}, func(listedJob) bool { return false }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				want := b.idsWhere(tc.keep)
				if len(want) == 0 && tc.name != "MatchesNothing" {
					t.Fatal("the fixture has no job for this filter: the case proves nothing")
				}
				tc.params.Limit = 4
				got := listAll(t, b.client, tc.params)
				if !slices.Equal(got, want) {
					t.Errorf("got ids %v, want %v", got, want)
				}
			})
		}
	})

	t.Run("Orderings", func(t *testing.T) {
		t.Parallel()
		sortValue := map[pgqueue.JobListOrder]func(j listedJob) time.Time{
			pgqueue.JobListOrderID:          func(listedJob) time.Time { return time.Time{} },
			pgqueue.JobListOrderCreatedAt:   func(j listedJob) time.Time { return j.createdAt },
			pgqueue.JobListOrderRunAt:       func(j listedJob) time.Time { return j.runAt },
			pgqueue.JobListOrderFinalizedAt: func(j listedJob) time.Time { return j.finalizedAt },
		}
		for order, value := range sortValue {
			for _, desc := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/desc=%t", order, desc), func(t *testing.T) {
					want := b.idsWhere(func(j listedJob) bool { return order != pgqueue.JobListOrderFinalizedAt || j.finalized })
					byID := map[int64]listedJob{}
					for _, j := range b.jobs {
						byID[j.id] = j
					}
					slices.SortFunc(want, func(x, y int64) int {
						c := value(byID[x]).Compare(value(byID[y]))
						if c == 0 {
							c = cmp.Compare(x, y)
						}
						if desc {
							return -c
						}
						return c
					})
					for _, limit := range []int{1, 3, 40, 1000} {
						got := listAll(t, b.client, pgqueue.JobListParams{OrderBy: order, Descending: desc, Limit: limit})
						if !slices.Equal(got, want) {
							t.Fatalf("limit %d: got %v, want %v", limit, got, want)
						}
					}
					// With a filter, across pages.
					got := listAll(t, b.client, pgqueue.JobListParams{OrderBy: order, Descending: desc, Limit: 2, Queues: []string{"email"}})
					wantEmail := slices.DeleteFunc(slices.Clone(want), func(id int64) bool { return byID[id].queue != "email" })
					if !slices.Equal(got, wantEmail) {
						t.Fatalf("queue email: got %v, want %v", got, wantEmail)
					}
				})
			}
		}
	})

	t.Run("Limits", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.JobList(ctx, &pgqueue.JobListParams{Limit: 40})
		must(t, err)
		if len(res.Jobs) != 40 || res.NextCursor != "" {
			t.Errorf("limit equal to the jobs: %d jobs, cursor %q; want 40 and none", len(res.Jobs), res.NextCursor)
		}
		res, err = b.client.JobList(ctx, &pgqueue.JobListParams{Limit: 39})
		must(t, err)
		if len(res.Jobs) != 39 || res.NextCursor == "" {
			t.Errorf("limit below the jobs: %d jobs, cursor %q; want 39 and a cursor", len(res.Jobs), res.NextCursor)
		}
		res, err = b.client.JobList(ctx, &pgqueue.JobListParams{Limit: pgqueue.MaxJobListLimit})
		must(t, err)
		if len(res.Jobs) != 40 {
			t.Errorf("max limit: %d jobs", len(res.Jobs))
		}
		for _, limit := range []int{-1, pgqueue.MaxJobListLimit + 1} {
			if _, err := b.client.JobList(ctx, &pgqueue.JobListParams{Limit: limit}); !errors.Is(err, pgqueue.ErrInvalid) {
				t.Errorf("limit %d: got %v, want ErrInvalid", limit, err)
			}
		}
	})

	t.Run("ErrorIfInvalidOption", func(t *testing.T) {
		t.Parallel()
		for name, p := range map[string]*pgqueue.JobListParams{
			"Order":       {OrderBy: "priority"},
			"State":       {States: []pgqueue.JobState{"retryable"}},
			"ArgsArray":   {ArgsContain: []int{1}},
			"ArgsString":  {ArgsContain: "x"},
			"ArgsInvalid": {ArgsContain: json.RawMessage(`{`)},
			"ArgsChan":    {ArgsContain: make(chan int)},
		} {
			if res, err := b.client.JobList(ctx, p); !errors.Is(err, pgqueue.ErrInvalid) || res != nil {
				t.Errorf("%s: got %v, %v; want ErrInvalid", name, res, err)
			}
		}
	})

	t.Run("ErrorIfBadCursor", func(t *testing.T) {
		t.Parallel()
		first, err := b.client.JobList(ctx, &pgqueue.JobListParams{OrderBy: pgqueue.JobListOrderCreatedAt, Limit: 5})
		must(t, err)
		for name, p := range map[string]*pgqueue.JobListParams{
			"Garbage":        {Cursor: "not a cursor!"},
			"NotJSON":        {Cursor: "bm90IGpzb24"},
			"OtherOrdering":  {Cursor: first.NextCursor, OrderBy: pgqueue.JobListOrderRunAt},
			"OtherDirection": {Cursor: first.NextCursor, OrderBy: pgqueue.JobListOrderCreatedAt, Descending: true},
			"DefaultOrder":   {Cursor: first.NextCursor},
		} {
			if res, err := b.client.JobList(ctx, p); !errors.Is(err, pgqueue.ErrInvalid) || res != nil {
				t.Errorf("%s: got %v, %v; want ErrInvalid", name, res, err)
			}
		}
		// The right ordering accepts it, whatever the filters.
		if _, err := b.client.JobList(ctx, &pgqueue.JobListParams{Cursor: first.NextCursor, OrderBy: pgqueue.JobListOrderCreatedAt, Kinds: []string{"beta"}}); err != nil {
			t.Errorf("same ordering: %v", err)
		}
	})

	t.Run("NilParamsListByID", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.JobList(ctx, nil)
		must(t, err)
		got := make([]int64, len(res.Jobs))
		for i, j := range res.Jobs {
			got[i] = j.ID
		}
		if want := b.idsWhere(func(listedJob) bool { return true }); !slices.Equal(got, want) || res.NextCursor != "" {
			t.Errorf("got %v cursor %q, want %v", got, res.NextCursor, want)
		}
	})

	t.Run("RowsAreComplete", func(t *testing.T) {
		t.Parallel()
		res, err := b.client.JobList(ctx, &pgqueue.JobListParams{IDs: []int64{b.jobs[1].id}})
		must(t, err)
		want, err := b.client.JobGet(ctx, b.jobs[1].id)
		must(t, err)
		if len(res.Jobs) != 1 {
			t.Fatalf("%d jobs", len(res.Jobs))
		}
		got := res.Jobs[0]
		if got.ID != want.ID || got.State != want.State || string(got.EncodedArgs) != string(want.EncodedArgs) ||
			!slices.Equal(got.Tags, want.Tags) || !got.FinalizedAt.Equal(want.FinalizedAt) || !got.CreatedAt.Equal(want.CreatedAt) ||
			got.State != pgqueue.StateDiscarded || got.FinalizedAt.IsZero() {
			t.Errorf("JobList row %+v, JobGet row %+v", got, want)
		}
	})
}

// Paging while jobs are inserted returns every job that existed when the
// paging started exactly once, and no job twice.
func TestJobListPagingWhileInserting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, p := range []pgqueue.JobListParams{
		{OrderBy: pgqueue.JobListOrderID},
		{OrderBy: pgqueue.JobListOrderID, Descending: true},
		{OrderBy: pgqueue.JobListOrderCreatedAt},
		{OrderBy: pgqueue.JobListOrderCreatedAt, Descending: true},
		{OrderBy: pgqueue.JobListOrderRunAt, States: []pgqueue.JobState{pgqueue.StateAvailable}},
	} {
		t.Run(fmt.Sprintf("%s/desc=%t", p.OrderBy, p.Descending), func(t *testing.T) {
			t.Parallel()
			b := listFixture(t)
			before := map[int64]bool{}
			for _, j := range b.jobs {
				if len(p.States) == 0 || j.state == string(p.States[0]) {
					before[j.id] = true
				}
			}
			p.Limit = 3
			seen := map[int64]int{}
			for page := 0; ; page++ {
				res, err := b.client.JobList(ctx, &p)
				must(t, err)
				for _, j := range res.Jobs {
					seen[j.ID]++
				}
				// New jobs between pages: some created now (after every
				// fixture job), some with the fixture's times.
				_, err = b.client.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: listBetaArgs{}}, {Args: listAlphaArgs{}}})
				must(t, err)
				_, err = b.pool.Exec(ctx, `UPDATE pgqueue.jobs SET created_at = $1, run_at = $1
					WHERE id = (SELECT max(id) FROM pgqueue.jobs)`, b.base.Add(time.Duration(page%17)*time.Second))
				must(t, err)
				if res.NextCursor == "" {
					break
				}
				p.Cursor = res.NextCursor
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("job %d returned %d times", id, n)
				}
			}
			for id := range before {
				if seen[id] != 1 {
					t.Errorf("job %d existed before and was returned %d times", id, seen[id])
				}
			}
		})
	}
}
