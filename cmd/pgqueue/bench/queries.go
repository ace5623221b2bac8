package bench

import (
	"embed"

	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

// sqlFiles holds every statement the package runs itself, one file each;
// the library runs its own.
//
//go:embed sql/*.sql
var sqlFiles embed.FS

// currentSettingSQL names no schema, and Settings, which runs before any
// Config exists, has none to fill in.
//
//go:embed sql/current_setting.sql
var currentSettingSQL string

// queries holds the statements of sql/ with a run's schema filled in.
type queries struct {
	schema string
	// preparing the table
	emptyJobs, insertFiller, vacuumAnalyzeJobs, checkpoint string
	// the raw ceiling
	rawCopy, rawClaim, rawComplete string
	// reports
	backends, backendPID, tableState string
	// the pruner's backlog and what became of it
	pruneBacklog, prunePending, pruneBacklogLeft, tableSizes, deletedRows, vacuumJobs, walPosition string
	// what a limit or sequence run kept, by the database
	flowStarts, flowPeakRunning, flowSpan, sequenceOrder string
	// pg_stat_statements (Config.StatStatements)
	statStatementsCreate, statStatementsReset, statStatements string
	// what runs beside a sustained load
	activity string
	// preparing a workflow run, and what its releases took
	vacuumAnalyzeJobDeps, workflowRelease string
}

// loadQueries reads sql/ with schema, which must be valid, filled in.
func loadQueries(schema string) (*queries, error) {
	q := &queries{schema: schema}
	err := sqlschema.Load(sqlFiles, "sql", schema, map[string]*string{
		"empty_jobs": &q.emptyJobs, "insert_filler": &q.insertFiller,
		"vacuum_analyze_jobs": &q.vacuumAnalyzeJobs, "checkpoint": &q.checkpoint,
		"raw_copy": &q.rawCopy, "raw_claim": &q.rawClaim, "raw_complete": &q.rawComplete,
		"backends": &q.backends, "backend_pid": &q.backendPID, "table_state": &q.tableState,
		// the pruner's backlog
		"prune_backlog": &q.pruneBacklog, "prune_pending": &q.prunePending, "prune_backlog_left": &q.pruneBacklogLeft,
		"table_sizes": &q.tableSizes, "deleted_rows": &q.deletedRows, "vacuum_jobs": &q.vacuumJobs,
		"wal_position": &q.walPosition,
		// limit and sequence runs
		"flow_starts": &q.flowStarts, "flow_peak_running": &q.flowPeakRunning, "flow_span": &q.flowSpan, "sequence_order": &q.sequenceOrder,
		"stat_statements_create": &q.statStatementsCreate, "stat_statements_reset": &q.statStatementsReset,
		"stat_statements": &q.statStatements, "activity": &q.activity,
		"vacuum_analyze_job_deps": &q.vacuumAnalyzeJobDeps, "workflow_release": &q.workflowRelease,
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

// queries returns the statements for cfg's schema, loaded on first use and
// again only if Schema changed since.
func (cfg *Config) queries() (*queries, error) {
	if cfg.sql == nil || cfg.sql.schema != cfg.schema() {
		q, err := loadQueries(cfg.schema())
		if err != nil {
			return nil, err
		}
		cfg.sql = q
	}
	return cfg.sql, nil
}
