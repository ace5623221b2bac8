// Command periodicworker is the worker process of pgqueue's periodic jobs
// fault test (integration/periodic_test.go). It runs a client with one
// periodic job, named by -job, of kind "tick" on the default queue, due
// every -period, and works those jobs (doing nothing). Whichever process
// leads maintenance enqueues the job's instants.
//
// It prints "ready" once started and stops gracefully on SIGTERM or
// SIGINT, then prints "stopped". All its sessions carry application_name
// periodicworker-<name>, which is also its client ID, so the holder of the
// maintenance lease. The flags it shares with the other worker commands,
// and its exit codes, are workerproc's; -lease is the job lease and the
// maintenance leader's TTL.
//
// Usage:
//
//	periodicworker -db postgres://... -name 1 [-job tick] [-period 1s] [-poll 100ms]
package main

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/integration/internal/workerproc"
)

// TickArgs are the args of the periodic job's runs.
type TickArgs struct{}

// Kind implements pgqueue.JobArgs.
func (TickArgs) Kind() string { return "tick" }

// options are periodicworker's own flags.
type options struct {
	job    string
	period time.Duration
	poll   time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.job, "job", "tick", "the periodic job's name")
	fs.DurationVar(&o.period, "period", time.Second, "the periodic job's interval")
	fs.DurationVar(&o.poll, "poll", 100*time.Millisecond, "fetch poll interval: how soon a follower sees the leader's lease free")
}

func (o *options) check() error {
	if o.period < time.Second || o.poll <= 0 {
		return errors.New("need -period >= 1s and -poll > 0")
	}
	return nil
}

func main() {
	o := &options{}
	workerproc.Main(workerproc.Spec{
		Command:    "periodicworker",
		LeaseUsage: "job lease; also the maintenance leader's TTL",
		Flags:      o.register,
		Check:      o.check,
		Pool:       func(cfg *pgxpool.Config) { cfg.MaxConns = 8 },
		Run:        o.run,
	})
}

// run works until ctx ends.
func (o *options) run(ctx context.Context, p *workerproc.Worker) error {
	workers := pgqueue.NewWorkers()
	if err := pgqueue.AddWorkerFunc(workers, func(context.Context, *pgqueue.Job[TickArgs]) error { return nil }, nil); err != nil {
		return err
	}
	tick := pgqueue.NewPeriodicJob(o.job, pgqueue.EverySchedule(o.period),
		func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) { return TickArgs{}, nil }, nil)
	client, err := pgqueue.New(p.Pool, &pgqueue.Config{
		Schema:            p.Schema,
		ID:                p.AppName,
		Queues:            map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
		JobLease:          p.Lease,
		LeaderTTL:         p.Lease,
		RescueInterval:    p.Lease / 4,
		FetchPollInterval: o.poll,
		SchedulerInterval: o.poll,
		PeriodicJobs:      []*pgqueue.PeriodicJob{tick},
		Logger:            p.Log,
	})
	if err != nil {
		return err
	}
	if err := p.Serve(ctx, client); err != nil {
		return err
	}
	p.Say("stopped")
	return nil
}
