package pgqueuetest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// A test file of an application that enqueues a welcome email when a user
// signs up, and whose handler retries when the mail server refuses.
// Its TestMain is `os.Exit(pgqueuetest.Main(m, migrateApp))`.

type welcomeArgs struct {
	UserID int64  `json:"user_id"`
	Locale string `json:"locale"`
}

func (welcomeArgs) Kind() string { return "welcome_email" }

var errMailRefused = errors.New("mail server refused")

// signUp is the code under test: the user row and the job commit together.
func signUp(ctx context.Context, pool *pgxpool.Pool, client *pgqueue.Client, userID int64) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	// ... INSERT INTO users ...
	_, err = client.EnqueueTx(ctx, tx, welcomeArgs{UserID: userID, Locale: "fr"},
		&pgqueue.EnqueueOpts{Queue: "email", RunAt: time.Now().Add(10 * time.Minute)})
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func sendWelcome(ctx context.Context, job *pgqueue.Job[welcomeArgs]) error {
	if job.Args.Locale == "" {
		return errMailRefused
	}
	return pgqueue.RecordOutput(ctx, map[string]any{"sent_to": job.Args.UserID})
}

func testSignUpEnqueuesWelcome(t *testing.T) {
	ctx := t.Context()
	pool := pgqueuetest.NewPool(t) // a migrated database of this test's own
	client, err := pgqueue.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := signUp(ctx, pool, client, 42); err != nil {
		t.Fatal(err)
	}
	pgqueuetest.RequireEnqueued(ctx, t, pool, welcomeArgs{}, &pgqueuetest.Match{
		Args:        map[string]any{"user_id": 42}, // a subset of the args
		Queue:       "email",
		ScheduledAt: time.Now().Add(10 * time.Minute),
	})
	pgqueuetest.RequireEnqueuedN(ctx, t, pool, welcomeArgs{}, nil, 1)
}

func testWelcomeHandler(t *testing.T) {
	ctx := t.Context()
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, sendWelcome, nil); err != nil {
		t.Fatal(err)
	}
	client, err := pgqueue.New(pgqueuetest.NewPool(t), &pgqueue.Config{Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	// The real handler, claim and result write; no client started.
	r := pgqueuetest.Work(ctx, t, client, welcomeArgs{UserID: 42, Locale: "fr"}, nil)
	if r.Result != pgqueue.OutcomeCompleted || string(r.Job.Output) != `{"sent_to": 42}` {
		t.Fatalf("got %s, output %s", r.Result, r.Job.Output)
	}
	r = pgqueuetest.Work(ctx, t, client, welcomeArgs{UserID: 43}, nil)
	if r.Result != pgqueue.OutcomeRetried || !errors.Is(r.Err, errMailRefused) {
		t.Fatalf("got %s, %v", r.Result, r.Err)
	}
}

// The whole file is the example: a TestMain with pgqueuetest.Main, an
// assertion on what a sign-up enqueued, and a handler worked through
// pgqueuetest.Work.
func Example() {
	// In your own _test.go file these are TestSignUpEnqueuesWelcome and
	// TestWelcomeHandler.
	_, _ = testSignUpEnqueuesWelcome, testWelcomeHandler
}
