package pgqueue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// ghostArgs is a kind no test registers a worker for.
type ghostArgs struct{}

func (ghostArgs) Kind() string { return "ghost" }

// TestUnknownKind checks that a job whose kind no worker knows waits, its
// attempt unspent, and is discarded at its UnknownKindMaxTries-th try, the
// tries counted in the row.
func TestUnknownKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := func(maxTries int) *pgqueue.Config {
		return &pgqueue.Config{UnknownKindDelay: time.Microsecond, UnknownKindMaxTries: maxTries, Logger: testlog.Discard()}
	}

	t.Run("DiscardedAtTheLastTryNotBefore", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a job of an unknown kind discarded at its last try, not before")
		pool := newPool(t)
		auditUpdates(t, pool)
		b := startClient(t, pool, noteWorkers(t), cfg(3))
		res, err := b.client.Enqueue(ctx, ghostArgs{}, nil)
		must(t, err)
		s := waitState(t, pool, res.ID, "discarded")
		// Three claims: two waited, the third discarded.
		if n := updatesTo(t, pool, res.ID, "running"); n != 3 {
			t.Fatalf("claimed %d times, want 3", n)
		}
		if len(s.errors) != 3 || s.attempt != 1 {
			t.Fatalf("attempt %d errors %q", s.attempt, s.errors)
		}
		for i, want := range []string{`no worker for job kind "ghost" (try 1)`, `no worker for job kind "ghost" (try 2)`, `no worker for job kind "ghost" after 3 tries; discarded`} {
			if !strings.Contains(s.errors[i], want) {
				t.Fatalf("error %d is %q, want it to hold %q", i, s.errors[i], want)
			}
		}
		if n := countJobs(t, pool, "id = $1 AND finalized_at IS NOT NULL AND jsonb_path_query_array(errors, '$[*].unknown_kind') = '[true, true]'", res.ID); n != 1 {
			t.Fatal("want the two waits marked unknown_kind in errors, the discard not, and finalized_at set")
		}
	})

	t.Run("TriesRecordedByOtherClientsCount", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, ghostArgs{}, nil)
		must(t, err)
		// Four tries made elsewhere (other clients, before a restart).
		_, err = pool.Exec(ctx, `UPDATE pgqueue.jobs SET errors = (
			SELECT jsonb_agg(jsonb_build_object('attempt', 0, 'at', now(), 'error', 'elsewhere', 'unknown_kind', true))
			FROM generate_series(1, 4)) WHERE id = $1`, res.ID)
		must(t, err)
		auditUpdates(t, pool)
		startClient(t, pool, noteWorkers(t), cfg(5))
		s := waitState(t, pool, res.ID, "discarded")
		if n := updatesTo(t, pool, res.ID, "running"); n != 1 || len(s.errors) != 5 || !strings.Contains(s.errors[4], "after 5 tries") {
			t.Fatalf("claimed %d times, errors %q: want one try here, the fifth", n, s.errors)
		}
	})

	t.Run("OtherErrorsDoNotCount", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, ghostArgs{}, nil)
		must(t, err)
		_, err = pool.Exec(ctx, `UPDATE pgqueue.jobs SET errors = (
			SELECT jsonb_agg(jsonb_build_object('attempt', g, 'at', now(), 'error', 'failed'))
			FROM generate_series(1, 4) g) WHERE id = $1`, res.ID)
		must(t, err)
		auditUpdates(t, pool)
		startClient(t, pool, noteWorkers(t), cfg(2))
		s := waitState(t, pool, res.ID, "discarded")
		if n := updatesTo(t, pool, res.ID, "running"); n != 2 || len(s.errors) != 6 {
			t.Fatalf("claimed %d times, errors %q: want two tries here", n, s.errors)
		}
	})

	t.Run("NegativeNeverDiscards", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a negative UnknownKindMaxAttempts never discarding")
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, ghostArgs{}, nil)
		must(t, err)
		_, err = pool.Exec(ctx, `UPDATE pgqueue.jobs SET errors = (
			SELECT jsonb_agg(jsonb_build_object('attempt', 0, 'at', now(), 'error', 'elsewhere', 'unknown_kind', true))
			FROM generate_series(1, 50)) WHERE id = $1`, res.ID)
		must(t, err)
		startClient(t, pool, noteWorkers(t), &pgqueue.Config{UnknownKindDelay: time.Hour, UnknownKindMaxTries: -1, Logger: testlog.Discard()})
		waitFor(t, "a try", func() bool {
			return countJobs(t, pool, "id = $1 AND state = 'scheduled' AND jsonb_array_length(errors) = 51 AND attempt = 0", res.ID) == 1
		})
	})
}
