package maintenance

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/loop"
	"github.com/pgqueue/pgqueue/internal/schemawatch"
	"github.com/pgqueue/pgqueue/pglock"
)

// Lease is the lease lock whose holder runs the maintenance tasks: one
// client per schema at a time. The poller asks the database whether it is
// free, to nudge the elector.
const Lease = "pgqueue:maintenance"

// Leader is the work one client per schema does for all: it campaigns for
// Lease through Elector and, while it leads, runs each task until the term
// ends.
type Leader struct {
	// Elector campaigns for Lease.
	Elector   *pglock.Elector
	Log       *slog.Logger
	Scheduler *Scheduler
	Rescuer   *Rescuer
	Pruner    *Pruner
	Periodic  *PeriodicEnqueuer
	// ReportQueues, when set, reads the queues' counts and hands them to
	// the observer: at the start of each term and every QueuesInterval of
	// it.
	ReportQueues func(ctx context.Context) error
	// QueuesInterval is the time between two reports.
	QueuesInterval time.Duration
	// QueuesEnded tells the observer, at the end of a term, that another
	// client reports the counts now. Required with ReportQueues.
	QueuesEnded func()
	// Watch holds the report back while the schema is outdated; nil for
	// none. Each task has its own field.
	Watch *schemawatch.Watch
	// Base is the context of each report's statements: the end of the
	// term lets a report in flight finish (see Pruner.Base).
	Base context.Context
}

// Run campaigns until ctx (the client's fetch context) ends.
func (m *Leader) Run(ctx context.Context) {
	m.Elector.Run(ctx, m.lead)
}

// lead runs the tasks for one term, until ctx ends.
func (m *Leader) lead(ctx context.Context, term int64) {
	m.Log.InfoContext(ctx, "pgqueue: leading maintenance", "term", term)
	defer func() {
		if cause := context.Cause(ctx); errors.Is(cause, pglock.ErrLost) {
			m.Log.WarnContext(ctx, "pgqueue: maintenance leadership lost", "term", term, "err", cause)
		} else {
			m.Log.InfoContext(ctx, "pgqueue: maintenance leadership ended", "term", term)
		}
	}()
	tasks := []func(context.Context){m.Scheduler.Run, m.Rescuer.Run, m.Pruner.Run}
	if m.ReportQueues != nil {
		tasks = append(tasks, m.reportQueues)
	}
	// The periodic jobs' runs on start are once per term.
	tasks = append(tasks, func(ctx context.Context) { m.Periodic.Run(ctx, term) })
	var wg sync.WaitGroup
	for _, task := range tasks {
		wg.Add(1)
		go func() { defer wg.Done(); task(ctx) }()
	}
	wg.Wait()
}

// reportQueues hands the queues' counts to the observer every interval
// of the term (they are read from partial indexes: cheap however many
// finished jobs the table holds), then says the term ended: another
// client reports them now.
func (m *Leader) reportQueues(ctx context.Context) {
	r := newRounds(m.Watch, m.Log, "reading queue counts for the observer")
	report := func() {
		if r.held() {
			return
		}
		qctx, cancel := context.WithTimeout(m.Base, jobsql.WriteTimeout)
		defer cancel()
		r.done(ctx, m.ReportQueues(qctx))
	}
	report()
	loop.Every(ctx, m.QueuesInterval, report)
	m.QueuesEnded()
}
