package pgqueue

import (
	"embed"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// sqlFiles holds every statement the package runs, one file each; Go code
// names a statement, it never builds one.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// oneShotPlan, passed first among a statement's arguments, has PostgreSQL
// plan it for the arrays it is given, every time. Statements joining
// unnest($arrays) with jobs need that: a cached generic plan does not know
// the arrays' length, and was seen to rescan them once per running row,
// two seconds for one batch of 2,000 results. Exec (the unnamed statement,
// planned at each bind) rather than cache_describe: it needs no
// description cache, which pools behind poolers often turn off
// (description_cache_capacity=0 made every such statement fail).
const oneShotPlan = pgx.QueryExecModeExec

// writeTimeout bounds each statement that claims jobs or records their
// results.
const writeTimeout = 15 * time.Second

// queries holds every statement of sql/, with the schema filled in once.
type queries struct {
	// enqueue
	insert, insertMany, copyJobs, copyJobsScheduled string
	insertUnique, insertManyUnique                  string
	notify, notifyQueues, notifyDue                 string
	// work
	claim, claimLock, poll, heartbeat, complete, completeMany, finish, jobOutcomes string
	setIdleTimeout, checkFence                                                     string
	claimID                                                                        string // pgqueuetest.WorkJob
	// reading jobs; jobListBy holds job_list.sql expanded per ordering
	jobGet, jobList string
	jobListBy       map[jobListKey]string
	// control
	jobCancel, jobOutput, jobProgress                string
	jobRetry, jobRetryMany, jobDelete, jobDeleteMany string
	queuePause, queueResume, queueList               string
	// maintenance
	schedule, rescueCandidates, rescue           string
	prune                                        string
	periodicStates, periodicLock, periodicCreate string
	periodicAdvance, periodicStarted             string
	periodicDescribe                             string
	// migrations
	createSchemaLock, createSchema, migrateLock, migrateUnlock string
}

// loadQueries reads sql/ with schema, which must be valid, filled in.
func loadQueries(schema string) (*queries, error) {
	q := &queries{}
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"insert": &q.insert, "insert_many": &q.insertMany, "copy_jobs": &q.copyJobs, "copy_jobs_scheduled": &q.copyJobsScheduled,
		"insert_unique": &q.insertUnique, "insert_many_unique": &q.insertManyUnique,
		"notify": &q.notify, "notify_queues": &q.notifyQueues, "notify_due": &q.notifyDue,
		"claim": &q.claim, "claim_lock": &q.claimLock, "poll": &q.poll, "heartbeat": &q.heartbeat, "complete": &q.complete,
		"complete_many": &q.completeMany, "finish": &q.finish, "job_outcomes": &q.jobOutcomes,
		"set_idle_timeout": &q.setIdleTimeout, "check_fence": &q.checkFence, "claim_id": &q.claimID,
		"job_cancel": &q.jobCancel,
		"job_output": &q.jobOutput, "job_progress": &q.jobProgress,
		"schedule": &q.schedule, "rescue_candidates": &q.rescueCandidates, "rescue": &q.rescue, "prune": &q.prune,
		"periodic_states": &q.periodicStates, "periodic_lock": &q.periodicLock, "periodic_create": &q.periodicCreate,
		"periodic_advance": &q.periodicAdvance, "periodic_describe": &q.periodicDescribe, "periodic_started": &q.periodicStarted,
		"create_schema_lock": &q.createSchemaLock, "create_schema": &q.createSchema,
		"migrate_lock": &q.migrateLock, "migrate_unlock": &q.migrateUnlock,
		"job_get": &q.jobGet, "job_list": &q.jobList,
		"job_retry": &q.jobRetry, "job_retry_many": &q.jobRetryMany, "job_delete": &q.jobDelete, "job_delete_many": &q.jobDeleteMany,
		"queue_pause": &q.queuePause, "queue_resume": &q.queueResume, "queue_list": &q.queueList,
	})
	if err != nil {
		return nil, err
	}
	q.jobListBy = expandJobList(q.jobList)
	return q, nil
}
