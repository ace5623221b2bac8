package workerkit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/workerkit"
)

// childEnv marks the test binary re-executed as a worker process.
const childEnv = "WORKERKIT_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		childMain()
		return
	}
	code := pgtest.Main(m, func(ctx context.Context, connString string) error {
		pool, err := pgxpool.New(ctx, connString)
		if err != nil {
			return err
		}
		defer pool.Close()
		_, err = pgqueue.Migrate(ctx, pool, pgqueue.SchemaDefault)
		return err
	})
	// Run, called in process, must leave nothing behind.
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// blockArgs is a job that runs until the file File exists, or until its
// context ends.
type blockArgs struct {
	File string `json:"file"`
}

func (blockArgs) Kind() string { return "block" }

// quickArgs is a job that succeeds at once.
type quickArgs struct{}

func (quickArgs) Kind() string { return "quick" }

// childMain is the worker process the tests run: a workerkit program
// whose handlers say "started <id>" on stdout.
func childMain() {
	workers := pgqueue.NewWorkers()
	pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[blockArgs]) error {
		fmt.Printf("started %d\n", job.ID)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := os.Stat(job.Args.File); err == nil {
				return nil
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-tick.C:
			}
		}
	}, nil)
	pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[quickArgs]) error { return nil }, nil)
	workerkit.Main(&workerkit.Options{Name: "kitworker", Workers: workers, Setup: func(ctx context.Context, env *workerkit.Env) error {
		// The leader reads the queues for the backlog gauges often
		// enough for a test to wait for them.
		env.Config.Observer = &pgqueue.Observer{QueuesInterval: 100 * time.Millisecond}
		return nil
	}})
}
