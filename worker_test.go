package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

type longKindArgs struct{}

func (longKindArgs) Kind() string { return strings.Repeat("k", 256) }

// TestWorkers checks the registry: what AddWorker accepts, and what a
// registered worker does with args it cannot decode.
func TestWorkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	noop := func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }

	t.Run("AddWorkerRefusesDuplicateKind", func(t *testing.T) {
		t.Parallel()
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, noop, nil))
		if err := pgqueue.AddWorkerFunc(ws, noop, nil); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("second AddWorkerFunc: err = %v, want ErrInvalid", err)
		}
		if err := pgqueue.AddWorker[noteArgs](ws, pgqueue.WorkFunc[noteArgs](noop), &pgqueue.WorkerOpts{Timeout: time.Second}); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("AddWorker: err = %v, want ErrInvalid", err)
		}
		// Another kind is welcome.
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[emailArgs]) error { return nil }, nil))
	})

	t.Run("AddWorkerRefusesInvalidKind", func(t *testing.T) {
		t.Parallel()
		ws := pgqueue.NewWorkers()
		if err := pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[emptyKindArgs]) error { return nil }, nil); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("empty kind: err = %v, want ErrInvalid", err)
		}
		if err := pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[longKindArgs]) error { return nil }, nil); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("kind of 256 bytes: err = %v, want ErrInvalid", err)
		}
	})

	t.Run("MalformedArgsFailTheAttempt", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "malformed args failing the attempt")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error { return nil }, nil))
		startClient(t, pool, ws, nil)
		var id int64
		must(t, pool.QueryRow(ctx, `INSERT INTO pgqueue.jobs (queue, kind, args, max_attempts) VALUES ('default', 'note', '{"n": "not a number"}', 1) RETURNING id`).Scan(&id))
		s := waitState(t, pool, id, "discarded")
		if len(s.errors) != 1 || !strings.Contains(s.errors[0], "invalid job args") {
			t.Fatalf("errors %q", s.errors)
		}
	})
}
