package pgqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// pauseArgs is a job that blocks its handler until the test releases it
// when Block is set.
type pauseArgs struct {
	Block bool `json:"block"`
}

func (pauseArgs) Kind() string { return "pause_test" }

// pauseWorkers runs pauseArgs jobs: each reports its start on started, and
// a blocking one returns when release is closed.
func pauseWorkers(t *testing.T) (ws *pgqueue.Workers, started chan int64, release chan struct{}) {
	ws = pgqueue.NewWorkers()
	started, release = make(chan int64, 100), make(chan struct{})
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[pauseArgs]) error {
		started <- job.ID
		if job.Args.Block {
			<-release
		}
		return nil
	}, nil))
	return ws, started, release
}

func enqueuePause(t *testing.T, c *pgqueue.Client, queue string, block bool) int64 {
	t.Helper()
	res, err := c.Enqueue(context.Background(), pauseArgs{Block: block}, &pgqueue.EnqueueOpts{Queue: queue})
	must(t, err)
	return res.ID
}

// stillAvailable checks, after a client had time for several polls and
// claims, that no client took job id. A bug that claimed the job late
// would be missed, never a correct pause reported as broken.
func stillAvailable(t *testing.T, pool *pgxpool.Pool, id int64, poll time.Duration) {
	t.Helper()
	time.Sleep(5 * poll)
	if s := readJob(t, pool, id); s.state != "available" {
		t.Fatalf("job %d of the paused queue is %s, want available", id, s.state)
	}
}

func TestQueuePause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ClaimTakesNothingFromAPausedQueue", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		id := b.jobIn(t, pgqueue.StateAvailable, nil)
		must(t, b.client.QueuePause(ctx, pgqueue.QueueDefault))
		must(t, b.client.QueuePause(ctx, pgqueue.QueueDefault)) // not an error
		jobs, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 10)
		must(t, err)
		if len(jobs) != 0 {
			t.Fatalf("claimed %d jobs from a paused queue", len(jobs))
		}
		if polled, err := pgqueue.Poll(ctx, b.client, []string{pgqueue.QueueDefault}); err != nil || len(polled) != 0 {
			t.Fatalf("poll: %v, %v; want no queue: a paused queue's producer need not be woken", polled, err)
		}
		must(t, b.client.QueueResume(ctx, pgqueue.QueueDefault))
		must(t, b.client.QueueResume(ctx, pgqueue.QueueDefault)) // not an error
		if polled, err := pgqueue.Poll(ctx, b.client, []string{pgqueue.QueueDefault}); err != nil || len(polled) != 1 {
			t.Fatalf("poll: %v, %v; want the queue", polled, err)
		}
		jobs, err = pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 10)
		must(t, err)
		if len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("claimed %v after resume, want job %d", jobs, id)
		}
	})

	t.Run("PauseKeepsItsFirstTime", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		must(t, b.client.QueuePause(ctx, "mail"))
		first := queueInfo(t, b.client, "mail")
		must(t, b.client.QueuePause(ctx, "mail"))
		if again := queueInfo(t, b.client, "mail"); !again.Paused || !again.PausedAt.Equal(first.PausedAt) {
			t.Fatalf("paused again: %+v, first %+v", again, first)
		}
	})

	t.Run("TxPausesAtCommitOnly", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		b.jobIn(t, pgqueue.StateAvailable, nil)
		tx := b.mustBegin(t)
		must(t, b.client.QueuePauseTx(ctx, tx, pgqueue.QueueDefault))
		must(t, tx.Rollback(ctx))
		jobs, err := pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 10)
		must(t, err)
		if len(jobs) != 1 {
			t.Fatalf("claimed %d jobs after a rolled back pause, want 1", len(jobs))
		}
		tx = b.mustBegin(t)
		must(t, b.client.QueuePauseTx(ctx, tx, "mail"))
		must(t, b.client.QueueResumeTx(ctx, tx, "mail"))
		must(t, tx.Commit(ctx))
		if q := queueInfo(t, b.client, "mail"); q.Paused {
			t.Fatal("paused and resumed in one transaction: still paused")
		}
	})

	t.Run("ErrorIfInvalidName", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		for _, name := range []string{"", "Mail", "a b", string(make([]byte, 64))} {
			if err := b.client.QueuePause(ctx, name); !errors.Is(err, pgqueue.ErrInvalid) {
				t.Errorf("QueuePause(%q): err = %v, want ErrInvalid", name, err)
			}
			if err := b.client.QueueResume(ctx, name); !errors.Is(err, pgqueue.ErrInvalid) {
				t.Errorf("QueueResume(%q): err = %v, want ErrInvalid", name, err)
			}
		}
	})

	// A started client stops claiming from a queue paused while it works
	// it, finishes the job it runs there, keeps working its other queue,
	// and claims again as soon as another client resumes the queue: by the
	// notification (the poll is an hour away) or, poll only, by the poll.
	for _, tc := range []struct {
		name     string
		pollOnly bool
		poll     time.Duration
	}{
		{"Notifications", false, time.Hour},
		{"PollOnly", true, 50 * time.Millisecond},
	} {
		t.Run("StartedClientStopsAndResumes"+tc.name, func(t *testing.T) {
			t.Parallel()
			skipInShortMode(t, "a started client stopping and resuming on a pause ("+tc.name+")")
			pool := newPool(t)
			ws, started, release := pauseWorkers(t)
			b := startClient(t, pool, ws, &pgqueue.Config{PollOnly: tc.pollOnly, FetchPollInterval: tc.poll,
				Queues: map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 1}, "other": {MaxWorkers: 1}}})
			operator := newClient(t, pool, nil)

			running := enqueuePause(t, b.client, pgqueue.QueueDefault, true)
			if id := <-started; id != running {
				t.Fatalf("started job %d, want %d", id, running)
			}
			must(t, operator.QueuePause(ctx, pgqueue.QueueDefault))
			waiting := enqueuePause(t, operator, pgqueue.QueueDefault, false)
			other := enqueuePause(t, operator, "other", false)
			waitState(t, pool, other, "completed")
			close(release)
			waitState(t, pool, running, "completed") // the running job finished
			// Its claim came back full, so finishing it made the producer
			// claim again: from the paused queue, nothing.
			stillAvailable(t, pool, waiting, 50*time.Millisecond)

			must(t, operator.QueueResume(ctx, pgqueue.QueueDefault))
			waitState(t, pool, waiting, "completed")
		})
	}

	// The pause is in the database: a second client is bound by it, and so
	// is a client started after every other stopped.
	t.Run("BindsEveryClientAndSurvivesRestart", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a pause binding every client and surviving a restart")
		pool := newPool(t)
		ws, _, _ := pauseWorkers(t)
		first := startClient(t, pool, ws, nil)
		second := startClient(t, pool, ws, nil)
		must(t, first.client.QueuePause(ctx, pgqueue.QueueDefault))
		waiting := enqueuePause(t, second.client, pgqueue.QueueDefault, false)
		stillAvailable(t, pool, waiting, 50*time.Millisecond)

		stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		must(t, first.client.Stop(stopCtx))
		must(t, second.client.Stop(stopCtx))
		restarted := startClient(t, pool, ws, nil)
		stillAvailable(t, pool, waiting, 50*time.Millisecond)
		must(t, restarted.client.QueueResume(ctx, pgqueue.QueueDefault))
		waitState(t, pool, waiting, "completed")
	})

	t.Run("QueueListCountsTheBacklog", func(t *testing.T) {
		t.Parallel()
		b := setupControl(t)
		older := b.jobIn(t, pgqueue.StateAvailable, nil)
		_, err := b.pool.Exec(ctx, "UPDATE pgqueue.jobs SET run_at = now() - interval '1 hour' WHERE id = $1", older)
		must(t, err)
		b.jobIn(t, pgqueue.StateAvailable, nil)
		b.jobIn(t, pgqueue.StateAvailable, nil)
		_, err = pgqueue.Claim(ctx, b.client, pgqueue.QueueDefault, 1) // takes the older one
		must(t, err)
		b.jobIn(t, pgqueue.StateScheduled, nil)
		b.jobIn(t, pgqueue.StateCompleted, nil)
		b.jobIn(t, pgqueue.StateScheduled, &pgqueue.EnqueueOpts{Queue: "mail"})
		b.jobIn(t, pgqueue.StateDiscarded, &pgqueue.EnqueueOpts{Queue: "finished-only"})
		// Two jobs of mail wait for a scheduled one: blocked.
		parent := b.jobIn(t, pgqueue.StateScheduled, &pgqueue.EnqueueOpts{Queue: "mail"})
		for range 2 {
			_, err := b.client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{Queue: "mail",
				DependsOn: []pgqueue.Dependency{pgqueue.DependsOnJob(parent)}})
			must(t, err)
		}
		must(t, b.client.QueuePause(ctx, "paused-empty"))
		must(t, b.client.QueuePause(ctx, "mail"))
		must(t, b.client.QueueResume(ctx, "mail"))

		queues, err := b.client.QueueList(ctx)
		must(t, err)
		var names []string
		for _, q := range queues {
			names = append(names, q.Name)
		}
		if len(queues) != 3 || names[0] != pgqueue.QueueDefault || names[1] != "mail" || names[2] != "paused-empty" {
			t.Fatalf("queues %v, want default, mail, paused-empty", names)
		}
		def, mail, empty := queues[0], queues[1], queues[2]
		if def.Paused || def.Blocked != 0 || def.Scheduled != 1 || def.Available != 2 || def.Running != 1 {
			t.Errorf("default: %+v, want 1 scheduled, 2 available, 1 running", def)
		}
		if def.OldestAvailableAt.IsZero() || def.OldestAvailableAge <= 0 || def.OldestAvailableAge > time.Minute {
			t.Errorf("default: oldest available at %v, age %v, want a few seconds", def.OldestAvailableAt, def.OldestAvailableAge)
		}
		if mail.Paused || mail.UpdatedAt.IsZero() || mail.Blocked != 2 || mail.Scheduled != 2 || mail.Available != 0 || !mail.OldestAvailableAt.IsZero() {
			t.Errorf("mail: %+v, want resumed, 2 blocked, 2 scheduled", mail)
		}
		if !empty.Paused || empty.PausedAt.IsZero() || empty.Blocked+empty.Scheduled+empty.Available+empty.Running != 0 {
			t.Errorf("paused-empty: %+v, want paused, no jobs", empty)
		}
	})
}

func queueInfo(t *testing.T, c *pgqueue.Client, name string) *pgqueue.QueueInfo {
	t.Helper()
	queues, err := c.QueueList(context.Background())
	must(t, err)
	for _, q := range queues {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("QueueList has no queue %s", name)
	return nil
}
