// Command worker is an example worker service built on pgqueue's
// workerkit: three job kinds, settings from flags and the environment,
// graceful shutdown, health checks and metrics. See README.md.
//
//	DATABASE_URL=postgres://localhost/app PGQUEUE_HTTP_ADDR=:9090 go run -C examples/worker .
package main

import (
	"context"
	"embed"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/workerkit"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

func mustSQL(name string) string {
	b, err := sqlFiles.ReadFile("sql/" + name + ".sql")
	if err != nil {
		panic(err)
	}
	return string(b)
}

var (
	schemaSQL        = mustSQL("schema")
	insertPaymentSQL = mustSQL("insert_payment")
	insertSummarySQL = mustSQL("insert_summary")
)

// WelcomeEmailArgs sends a welcome email.
type WelcomeEmailArgs struct {
	To   string `json:"to"`
	Name string `json:"name"`
}

// Kind implements pgqueue.JobArgs.
func (WelcomeEmailArgs) Kind() string { return "welcome_email" }

// EnqueueOpts puts emails on their own queue wherever they are enqueued
// from Go, so a slow mail provider never holds up payments.
func (WelcomeEmailArgs) EnqueueOpts() pgqueue.EnqueueOpts {
	return pgqueue.EnqueueOpts{Queue: "email", MaxAttempts: 10}
}

// ChargeOrderArgs charges an order at the payment provider and records
// the payment.
type ChargeOrderArgs struct {
	OrderID     int64 `json:"order_id"`
	AmountCents int64 `json:"amount_cents"`
}

// Kind implements pgqueue.JobArgs.
func (ChargeOrderArgs) Kind() string { return "charge_order" }

// DailySummaryArgs writes a summary of the payments; enqueued by the
// periodic job "daily-summary".
type DailySummaryArgs struct {
	At time.Time `json:"at"`
}

// Kind implements pgqueue.JobArgs.
func (DailySummaryArgs) Kind() string { return "daily_summary" }

// options are the service's own flags.
type options struct {
	outbox          string
	providerLatency time.Duration
	summaryEvery    time.Duration
}

func main() {
	o := &options{}
	workerkit.Main(&workerkit.Options{
		Name: "example-worker",
		// Emails beside payments, each queue with its own concurrency;
		// PGQUEUE_QUEUES or --queues override it.
		Defaults: workerkit.Settings{Queues: map[string]int{"default": 20, "email": 5}},
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&o.outbox, "outbox", filepath.Join(os.TempDir(), "example-worker-outbox"), "directory the fake mailer writes emails to")
			fs.DurationVar(&o.providerLatency, "provider-latency", 50*time.Millisecond, "mean latency of the fake payment provider")
			fs.DurationVar(&o.summaryEvery, "summary-every", 24*time.Hour, "interval of the periodic summary")
		},
		Setup: o.setup,
	})
}

// setup creates the business tables and registers the workers and the
// periodic job; the kit calls it once the database is reachable.
func (o *options) setup(ctx context.Context, env *workerkit.Env) error {
	if err := pgx.BeginFunc(ctx, env.Pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	}); err != nil {
		return fmt.Errorf("create business tables: %w", err)
	}
	if err := os.MkdirAll(o.outbox, 0o755); err != nil {
		return err
	}
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, o.sendWelcome, nil); err != nil {
		return err
	}
	if err := pgqueue.AddWorker(workers, &chargeWorker{pool: env.Pool, latency: o.providerLatency}, nil); err != nil {
		return err
	}
	if err := pgqueue.AddWorker(workers, &summaryWorker{pool: env.Pool}, nil); err != nil {
		return err
	}
	env.Config.Workers = workers
	env.Config.PeriodicJobs = append(env.Config.PeriodicJobs, pgqueue.NewPeriodicJob("daily-summary",
		pgqueue.EverySchedule(o.summaryEvery), func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) {
			return DailySummaryArgs{At: time.Now().UTC().Truncate(time.Second)}, nil
		}, nil))
	return nil
}

// sendWelcome "sends" the email by writing it to the outbox directory,
// one file per job: a repeated run overwrites the same file, as an email
// provider's idempotency key would make a repeated send a no-op.
func (o *options) sendWelcome(ctx context.Context, job *pgqueue.Job[WelcomeEmailArgs]) error {
	msg := fmt.Sprintf("To: %s\r\nSubject: Welcome, %s!\r\n\r\nThanks for signing up.\r\n", job.Args.To, job.Args.Name)
	path := filepath.Join(o.outbox, fmt.Sprintf("%d.eml", job.ID))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(msg), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// chargeWorker charges an order, then records the payment and completes
// the job in one transaction: the payment row exists exactly when the job
// is completed, however often the job ran.
type chargeWorker struct {
	pool    *pgxpool.Pool
	latency time.Duration
}

func (w *chargeWorker) Work(ctx context.Context, job *pgqueue.Job[ChargeOrderArgs]) error {
	// The provider's call, waiting between half and one and a half times
	// the mean latency.
	if w.latency > 0 {
		wait := w.latency/2 + rand.N(w.latency)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	client := pgqueue.ClientFromContext(ctx)
	return pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, insertPaymentSQL, job.Args.OrderID, job.Args.AmountCents, job.ID, job.Fence); err != nil {
			return err
		}
		// ErrJobLeaseLost: another worker took the job over; the
		// rollback leaves its payment to that worker.
		return client.CompleteTx(ctx, tx, job.JobRow)
	})
}

// summaryWorker writes the summary of the instant its job was enqueued
// for.
type summaryWorker struct {
	pool *pgxpool.Pool
}

func (w *summaryWorker) Work(ctx context.Context, job *pgqueue.Job[DailySummaryArgs]) error {
	_, err := w.pool.Exec(ctx, insertSummarySQL, job.Args.At)
	return err
}
