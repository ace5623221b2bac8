package main

import (
	"embed"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// sqlFiles holds every statement the commands run themselves, one file
// each; the rest is the library's.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// demoQueries holds the demo's statements of sql/, with its schema filled in.
type demoQueries struct {
	lockJobs, foreignJobs, emptyJobs string
	countLeft                        string
	countStates, summary             string
}

// loadDemoQueries reads sql/ with schema, which must be valid, filled in.
func loadDemoQueries(schema string) (*demoQueries, error) {
	q := &demoQueries{}
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"lock_jobs": &q.lockJobs, "foreign_jobs": &q.foreignJobs, "empty_jobs": &q.emptyJobs,
		"count_left":   &q.countLeft,
		"count_states": &q.countStates, "summary": &q.summary,
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// opsQueries holds the statements of the operator commands (stats,
// locks), with their schema filled in.
type opsQueries struct {
	statsFinished, statsRunning                   string
	locksLeases, locksAdvisory, runningSingletons string
}

// loadOpsQueries reads sql/ with schema, which must be valid, filled in.
func loadOpsQueries(schema string) (*opsQueries, error) {
	q := &opsQueries{}
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"stats_finished": &q.statsFinished, "stats_running": &q.statsRunning,
		"locks_leases": &q.locksLeases, "locks_advisory": &q.locksAdvisory,
		"running_singletons": &q.runningSingletons,
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}
