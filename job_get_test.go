package pgqueue_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestJobGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ReadsEveryColumn", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, emailArgs{To: "a@example.com"}, &pgqueue.EnqueueOpts{
			Queue: "mail", Priority: 2, MaxAttempts: 7, Tags: []string{"x", "y"},
			Meta: map[string]any{"k": "v"}, SingletonKey: "s1",
		})
		must(t, err)
		// A job as an operator finds it: claimed, failed once, cancel
		// requested, output and progress recorded.
		_, err = pool.Exec(ctx, `
			UPDATE pgqueue.jobs SET state = 'running', attempt = 1, fence = 42,
				lease_until = now() + interval '1 minute', worker_id = 'w1', attempted_at = now(),
				errors = '[{"attempt": 1, "at": "2026-01-02T03:04:05Z", "error": "boom", "trace": "stack"}]',
				cancel_requested_at = now(), output = '{"rows": 3}', progress = '{"done": 1}'
			WHERE id = $1`, res.ID)
		must(t, err)

		got, err := c.JobGet(ctx, res.ID)
		must(t, err)
		if got.ID != res.ID || got.Queue != "mail" || got.Kind != "email" || string(got.EncodedArgs) != `{"to": "a@example.com"}` ||
			got.Priority != 2 || got.State != pgqueue.StateRunning || got.Attempt != 1 || got.MaxAttempts != 7 ||
			got.Fence != 42 || got.WorkerID != "w1" || got.SingletonKey != "s1" {
			t.Fatalf("unexpected row %+v", got)
		}
		if !slices.Equal(got.Tags, []string{"x", "y"}) || string(got.Meta) != `{"k": "v"}` {
			t.Errorf("tags %q, meta %s", got.Tags, got.Meta)
		}
		if string(got.Output) != `{"rows": 3}` || string(got.Progress) != `{"done": 1}` {
			t.Errorf("output %s, progress %s", got.Output, got.Progress)
		}
		want := []pgqueue.AttemptError{{Attempt: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Error: "boom", Trace: "stack"}}
		if len(got.Errors) != 1 || got.Errors[0].Attempt != 1 || !got.Errors[0].At.Equal(want[0].At) ||
			got.Errors[0].Error != "boom" || got.Errors[0].Trace != "stack" {
			t.Errorf("errors %+v, want %+v", got.Errors, want)
		}
		for name, ts := range map[string]time.Time{
			"RunAt": got.RunAt, "LeaseUntil": got.LeaseUntil, "CreatedAt": got.CreatedAt,
			"AttemptedAt": got.AttemptedAt, "CancelRequestedAt": got.CancelRequestedAt,
		} {
			if ts.IsZero() {
				t.Errorf("%s is zero", name)
			}
		}
		if !got.FinalizedAt.IsZero() {
			t.Errorf("FinalizedAt = %v on a running job", got.FinalizedAt)
		}
	})

	t.Run("NullColumnsReadAsZero", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, emailArgs{}, nil)
		must(t, err)
		got, err := c.JobGet(ctx, res.ID)
		must(t, err)
		if got.Output != nil || got.Progress != nil || !got.CancelRequestedAt.IsZero() || got.Fence != 0 ||
			got.WorkerID != "" || !got.LeaseUntil.IsZero() || got.Errors != nil || got.State != pgqueue.StateAvailable {
			t.Fatalf("unexpected row %+v", got)
		}
		if !got.CreatedAt.Equal(res.CreatedAt) || !got.RunAt.Equal(res.RunAt) {
			t.Errorf("times differ from Enqueue's row: %v %v, want %v %v", got.CreatedAt, got.RunAt, res.CreatedAt, res.RunAt)
		}
	})

	t.Run("ErrorIfNotFound", func(t *testing.T) {
		t.Parallel()
		pool := newPool(t)
		c := newClient(t, pool, nil)
		res, err := c.Enqueue(ctx, emailArgs{}, nil)
		must(t, err)
		_, err = pool.Exec(ctx, "DELETE FROM pgqueue.jobs WHERE id = $1", res.ID)
		must(t, err)
		for _, id := range []int64{res.ID, res.ID + 1000, 0, -1} {
			if got, err := c.JobGet(ctx, id); !errors.Is(err, pgqueue.ErrJobNotFound) || got != nil {
				t.Errorf("JobGet(%d) = %v, %v; want ErrJobNotFound", id, got, err)
			}
		}
	})
}
