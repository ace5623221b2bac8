package pgqueueui

import (
	"embed"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// sqlFiles holds the statements the dashboard runs itself, one file each;
// jobs and queues are read and changed through pgqueue's Client.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// queries holds sql/ with the schema filled in.
type queries struct {
	throughput, leases, leader, advisoryLocks, periodicJobs string
	// workflows
	workflowCounts, workflowPage, workflowPageParents, recentWorkflows string
	jobWorkflow, jobDeps, jobsWorkflows                                string
}

func loadQueries(schema string) (*queries, error) {
	q := &queries{}
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"throughput": &q.throughput, "leases": &q.leases, "leader": &q.leader,
		"advisory_locks": &q.advisoryLocks, "periodic_jobs": &q.periodicJobs,
		"workflow_counts": &q.workflowCounts, "workflow_page": &q.workflowPage,
		"workflow_page_parents": &q.workflowPageParents, "recent_workflows": &q.recentWorkflows,
		"job_workflow": &q.jobWorkflow, "job_deps": &q.jobDeps, "jobs_workflows": &q.jobsWorkflows,
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}
