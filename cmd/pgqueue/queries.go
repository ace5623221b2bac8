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
	countStates, summary             string
}

// loadDemoQueries reads sql/ with schema, which must be valid, filled in.
func loadDemoQueries(schema string) (*demoQueries, error) {
	q := &demoQueries{}
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"lock_jobs": &q.lockJobs, "foreign_jobs": &q.foreignJobs, "empty_jobs": &q.emptyJobs,
		"count_states": &q.countStates, "summary": &q.summary,
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}
