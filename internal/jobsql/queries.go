// Package jobsql owns the SQL pgqueue runs against its schema: every
// statement of sql/ (loaded once per client with the schema filled in),
// the scanning of job rows, the NOTIFY channel names, and reading jobs back
// after a write whose reply was lost. Go code elsewhere names a statement
// here; it never builds one.
//
// It may import pgqueuetype and the small internal helpers (dberr,
// sqlschema); nothing that runs jobs.
package jobsql

import (
	"embed"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// sqlFiles holds every statement pgqueue runs, one file each; Go code
// names a statement, it never builds one.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// OneShotPlan, passed first among a statement's arguments, has PostgreSQL
// plan it for the arrays it is given, every time. Statements joining
// unnest($arrays) with jobs need that: a cached generic plan does not know
// the arrays' length, and was seen to rescan them once per running row,
// two seconds for one batch of 2,000 results. Exec (the unnamed statement,
// planned at each bind) rather than cache_describe: it needs no
// description cache, which pools behind poolers often turn off
// (description_cache_capacity=0 made every such statement fail).
const OneShotPlan = pgx.QueryExecModeExec

// WriteTimeout bounds each statement that claims jobs or records their
// results.
const WriteTimeout = 15 * time.Second

// Queries holds every statement of sql/, with the schema filled in once.
type Queries struct {
	// enqueue
	Insert, InsertMany, CopyJobs, CopyJobsScheduled string
	InsertUnique, InsertManyUnique                  string
	InsertUniqueUpsert                              string
	Notify, NotifyQueues, NotifyDue                 string
	// work
	Claim, ClaimSettings, ClaimFlow, FlowBacklog, ClaimLock, Poll, Heartbeat, Complete, CompleteOne, CompleteMany, Finish, JobOutcomes string
	SetIdleTimeout, CheckFence                                                                                                         string
	ClaimID                                                                                                                            string // pgqueuetest.WorkJob
	// reading jobs; JobListBy holds job_list.sql expanded per ordering
	JobGet, JobList string
	JobListBy       map[JobListKey]string
	// control
	JobCancel, JobOutput, JobProgress                string
	JobRetry, JobRetryMany, JobDelete, JobDeleteMany string
	QueuePause, QueueResume, QueueList               string
	QueueSetLimits, QueueHeld                        string
	JobCancelMany                                    string
	// workflows
	WorkflowParents, WorkflowReserve, InsertWorkflow string
	WorkflowJobs, WorkflowEdges, JobParentOutputs    string
	JobRow, JobParentCounts                          string
	// maintenance
	Schedule, RescueCandidates, Rescue           string
	Prune                                        string
	PeriodicStates, PeriodicLock, PeriodicCreate string
	PeriodicAdvance, PeriodicStarted             string
	PeriodicDescribe                             string
	// migrations
	CreateSchemaLock, CreateSchema, MigrateLock, MigrateUnlock string
}

// Load reads sql/ with schema, which must be valid, filled in.
func Load(schema string) (*Queries, error) {
	q := &Queries{}
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"insert": &q.Insert, "insert_many": &q.InsertMany, "copy_jobs": &q.CopyJobs, "copy_jobs_scheduled": &q.CopyJobsScheduled,
		"insert_unique": &q.InsertUnique, "insert_many_unique": &q.InsertManyUnique,
		"insert_unique_upsert": &q.InsertUniqueUpsert,
		"notify":               &q.Notify, "notify_queues": &q.NotifyQueues, "notify_due": &q.NotifyDue,
		"claim": &q.Claim, "claim_settings": &q.ClaimSettings, "claim_flow": &q.ClaimFlow, "flow_backlog": &q.FlowBacklog, "claim_lock": &q.ClaimLock, "poll": &q.Poll, "heartbeat": &q.Heartbeat, "complete": &q.Complete,
		"complete_one": &q.CompleteOne, "complete_many": &q.CompleteMany, "finish": &q.Finish, "job_outcomes": &q.JobOutcomes,
		"set_idle_timeout": &q.SetIdleTimeout, "check_fence": &q.CheckFence, "claim_id": &q.ClaimID,
		"job_cancel": &q.JobCancel,
		"job_output": &q.JobOutput, "job_progress": &q.JobProgress,
		"schedule": &q.Schedule, "rescue_candidates": &q.RescueCandidates, "rescue": &q.Rescue, "prune": &q.Prune,
		"periodic_states": &q.PeriodicStates, "periodic_lock": &q.PeriodicLock, "periodic_create": &q.PeriodicCreate,
		"periodic_advance": &q.PeriodicAdvance, "periodic_describe": &q.PeriodicDescribe, "periodic_started": &q.PeriodicStarted,
		"create_schema_lock": &q.CreateSchemaLock, "create_schema": &q.CreateSchema,
		"migrate_lock": &q.MigrateLock, "migrate_unlock": &q.MigrateUnlock,
		"job_get": &q.JobGet, "job_list": &q.JobList,
		"job_retry": &q.JobRetry, "job_retry_many": &q.JobRetryMany, "job_delete": &q.JobDelete, "job_delete_many": &q.JobDeleteMany,
		"queue_pause": &q.QueuePause, "queue_resume": &q.QueueResume, "queue_list": &q.QueueList,
		"queue_set_limits": &q.QueueSetLimits, "queue_held": &q.QueueHeld,
		"job_cancel_many":  &q.JobCancelMany,
		"workflow_parents": &q.WorkflowParents, "workflow_reserve": &q.WorkflowReserve, "insert_workflow": &q.InsertWorkflow,
		"workflow_jobs": &q.WorkflowJobs, "workflow_edges": &q.WorkflowEdges, "job_parent_outputs": &q.JobParentOutputs,
		"job_row": &q.JobRow, "job_parent_counts": &q.JobParentCounts,
	})
	if err != nil {
		return nil, err
	}
	q.JobListBy = expandJobList(q.JobList)
	return q, nil
}

// Grants returns sql/grants.sql for schema, which must be valid.
func Grants(schema string) (string, error) {
	var grants string
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{"grants": &grants})
	return grants, err
}

// JobListKey names one of the statements expanded from job_list.sql: an
// ordering column and a direction.
type JobListKey struct {
	Order string
	Desc  bool
}

// jobListOrderTypes is the fixed set job_list.sql's {{order}} is filled
// from, with each column's type for {{type}}.
var jobListOrderTypes = map[string]string{
	"id":           "bigint",
	"created_at":   "timestamptz",
	"run_at":       "timestamptz",
	"finalized_at": "timestamptz",
}

// expandJobList fills job_list.sql's placeholders for every ordering and
// direction, once per client.
func expandJobList(tmpl string) map[JobListKey]string {
	out := make(map[JobListKey]string, 2*len(jobListOrderTypes))
	for order, typ := range jobListOrderTypes {
		for _, desc := range []bool{false, true} {
			dir, op := "ASC", ">"
			if desc {
				dir, op = "DESC", "<"
			}
			out[JobListKey{order, desc}] = strings.NewReplacer(
				"{{order}}", order, "{{type}}", typ, "{{dir}}", dir, "{{cmp}}", op,
			).Replace(tmpl)
		}
	}
	return out
}
