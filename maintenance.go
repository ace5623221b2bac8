package pgqueue

import (
	"context"
	"log/slog"
	"sync"

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
}

// run campaigns until ctx (the client's fetch context) ends.
func (m *maintenance) run(ctx context.Context) {
	m.elector.Run(ctx, m.lead)
}

// lead runs the tasks for one term, until ctx ends.
func (m *maintenance) lead(ctx context.Context, term int64) {
	m.log.Debug("pgqueue: leading maintenance", "term", term)
	tasks := []func(context.Context){m.scheduler.run, m.rescuer.run, m.pruner.run}
	// The periodic jobs' runs on start are once per term.
	tasks = append(tasks, func(ctx context.Context) { m.periodic.run(ctx, term) })
	var wg sync.WaitGroup
	for _, task := range tasks {
		wg.Add(1)
		go func() { defer wg.Done(); task(ctx) }()
	}
	wg.Wait()
}
