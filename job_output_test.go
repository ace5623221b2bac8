package pgqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestRecordOutput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("StoredUnderTheFence", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "output stored under the holder's fence")
		pool := newPool(t)
		ws := pgqueue.NewWorkers()
		var fromCtx *pgqueue.Client
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			fromCtx = pgqueue.ClientFromContext(ctx)
			if err := pgqueue.RecordProgress(ctx, map[string]int{"done": 1, "total": 2}); err != nil {
				return err
			}
			return pgqueue.RecordOutput(ctx, map[string]string{"receipt": "r-1"})
		}, nil))
		b := startClient(t, pool, ws, nil)
		row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		waitState(t, pool, row.ID, "completed")
		var output, progress string
		must(t, pool.QueryRow(ctx, "SELECT output::text, progress::text FROM pgqueue.jobs WHERE id = $1", row.ID).Scan(&output, &progress))
		if output != `{"receipt": "r-1"}` || progress != `{"done": 1, "total": 2}` {
			t.Fatalf("output %s progress %s", output, progress)
		}
		if fromCtx != b.client {
			t.Fatal("ClientFromContext did not return the running client")
		}
	})

	// A holder whose claim was taken over cannot record: the write names
	// its fence, and the row has a newer one. Written at once, a heartbeat
	// may have cancelled the handler first or not; written after that
	// cancellation, the error says why the context ended. Either way it is
	// ErrJobLeaseLost.
	for _, afterCancel := range []bool{false, true} {
		name := "RefusedAfterLeaseLost"
		if afterCancel {
			name = "AfterCancelledForLostLease"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool := newPool(t)
			ws := pgqueue.NewWorkers()
			errs := make(chan error, 2)
			must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
				// Another claim takes the job over, as a rescue would.
				if _, err := pool.Exec(context.Background(), "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", job.ID); err != nil {
					return err
				}
				if afterCancel {
					<-ctx.Done() // the next heartbeat finds the fence moved
				}
				errs <- pgqueue.RecordOutput(ctx, "late")
				errs <- pgqueue.RecordProgress(ctx, 50)
				return nil
			}, nil))
			b := startClient(t, pool, ws, &pgqueue.Config{JobLease: time.Second})
			row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
			must(t, err)
			for range 2 {
				select {
				case err := <-errs:
					if !errors.Is(err, pgqueue.ErrJobLeaseLost) || afterCancel && !errors.Is(err, context.Canceled) {
						t.Fatalf("err = %v, want ErrJobLeaseLost (and context.Canceled after the cancellation)", err)
					}
				case <-time.After(30 * time.Second):
					t.Fatal("no write returned")
				}
			}
			if n := countJobs(t, pool, "id = $1 AND output IS NULL AND progress IS NULL", row.ID); n != 1 {
				t.Fatal("stale holder's output stored")
			}
		})
	}

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		if err := pgqueue.RecordOutput(ctx, 1); !errors.Is(err, pgqueue.ErrNoJobContext) {
			t.Fatalf("outside a job: %v", err)
		}
		if pgqueue.ClientFromContext(ctx) != nil {
			t.Fatal("ClientFromContext outside a job is not nil")
		}
		ws := pgqueue.NewWorkers()
		errs := make(chan error, 2)
		must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
			errs <- pgqueue.RecordOutput(ctx, strings.Repeat("x", 100))
			errs <- pgqueue.RecordOutput(ctx, make(chan int))
			return nil
		}, nil))
		b := startClient(t, pool, ws, &pgqueue.Config{MaxOutputSize: 64})
		_, err := b.client.Enqueue(ctx, noteArgs{}, nil)
		must(t, err)
		if err := <-errs; !errors.Is(err, pgqueue.ErrTooLarge) {
			t.Fatalf("oversize: %v", err)
		}
		if err := <-errs; !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("unencodable: %v", err)
		}
	})
}
