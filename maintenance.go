package pgqueue

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/loop"
	"github.com/pgqueue/pgqueue/pglock"
)

// maintenanceLease is the lease lock whose holder runs the maintenance
// tasks: one client per schema at a time.
const maintenanceLease = "pgqueue:maintenance"

// maintenance is the work one client per schema does for all: it
// campaigns for the lease lock maintenanceLease and, while it leads, runs
// each task until the term ends. A task is a loop that stops when its
// context ends; a new one is a field here and a file
// maintenance_<task>.go.
type maintenance struct {
	elector   *pglock.Elector
	log       *slog.Logger
	scheduler *scheduler
	rescuer   *rescuer
	pruner    *pruner
	periodic  *periodicEnqueuer
	// obs gets the queues' counts every obs.QueuesInterval, read with
	// queueList, while this client leads.
	obs       *Observer
	queueList func(ctx context.Context) ([]*QueueInfo, error)
}

// run campaigns until ctx (the client's fetch context) ends.
func (m *maintenance) run(ctx context.Context) {
	m.elector.Run(ctx, m.lead)
}

// lead runs the tasks for one term, until ctx ends.
func (m *maintenance) lead(ctx context.Context, term int64) {
	m.log.InfoContext(ctx, "pgqueue: leading maintenance", "term", term)
	defer func() {
		if cause := context.Cause(ctx); errors.Is(cause, pglock.ErrLost) {
			m.log.WarnContext(ctx, "pgqueue: maintenance leadership lost", "term", term, "err", cause)
		} else {
			m.log.InfoContext(ctx, "pgqueue: maintenance leadership ended", "term", term)
		}
	}()
	tasks := []func(context.Context){m.scheduler.run, m.rescuer.run, m.pruner.run}
	if m.obs != nil && m.obs.Queues != nil {
		tasks = append(tasks, m.reportQueues)
	}
	// The periodic jobs' runs on start are once per term.
	tasks = append(tasks, func(ctx context.Context) { m.periodic.run(ctx, term) })
	var wg sync.WaitGroup
	for _, task := range tasks {
		wg.Add(1)
		go func() { defer wg.Done(); task(ctx) }()
	}
	wg.Wait()
}

// reportQueues hands the queues' counts to the observer every interval
// of the term (QueueList reads them from partial indexes: cheap however
// many finished jobs the table holds), then nil: another client reports
// them now.
func (m *maintenance) reportQueues(ctx context.Context) {
	report := func() {
		qctx, cancel := context.WithTimeout(ctx, jobsql.WriteTimeout)
		defer cancel()
		if qs, err := m.queueList(qctx); err == nil {
			m.obs.Queues(qs)
		} else if ctx.Err() == nil {
			m.log.WarnContext(ctx, "pgqueue: reading queue counts for the observer failed", "err", err)
		}
	}
	report()
	loop.Every(ctx, m.obs.QueuesInterval, report)
	m.obs.Queues(nil)
}
