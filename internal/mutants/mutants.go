package main

// The test sets the mutants run. Root tests are named for what they check;
// the fault suite runs with them where it must catch the mutant on its
// own.
var (
	faultFence = testRun{pkg: "./integration/", run: "TestFaultPausedWorkerRefusedByFence"}
)

// mutants is every guarantee the suite must defend, broken one at a time.
// Keep old texts short but unique: the tool fails when one stops matching
// exactly once, so a change to the code brings its mutant up to date.
var mutants = []mutant{
	// Fences of the writes about a claimed job.
	{name: "complete_many-no-fence", file: "internal/jobsql/sql/complete_many.sql",
		old: "AND j.fence = r.fence AND CASE WHEN j.state = 'running'", new: "AND CASE WHEN j.state = 'running'",
		tests: []testRun{{pkg: "./", run: "TestStaleWriteRefusedByFence/CompleteMany|TestBatchedResults|TestRescuer"}, faultFence}},
	// complete_many.sql returns the refused ids, not the written ones: a
	// refusal it left out would be reported as written.
	{name: "complete_many-hides-refused", file: "internal/jobsql/sql/complete_many.sql",
		old: "WHERE (SELECT count(*) FROM done) < cardinality", new: "WHERE false AND (SELECT count(*) FROM done) < cardinality",
		tests: []testRun{{pkg: "./", run: "TestStaleWriteRefusedByFence/CompleteMany|TestBatchWriteRefusesOnlyLostClaims"}}},
	{name: "finish-hides-refused", file: "internal/jobsql/sql/finish.sql",
		old: "WHERE (SELECT count(*) FROM done) < cardinality", new: "WHERE false AND (SELECT count(*) FROM done) < cardinality",
		tests: []testRun{{pkg: "./", run: "TestStaleWriteRefusedByFence/Finish|TestBatchWriteRefusesOnlyLostClaims"}}},
	{name: "finish-settled-not-read", file: "internal/jobsql/sql/finish.sql",
		old: "SELECT NULL::bigint AS id, (SELECT s FROM settled AS t(s)) AS settled", new: "SELECT NULL::bigint AS id, NULL::integer AS settled",
		tests: []testRun{{pkg: "./", run: "TestBatchWriteRefusesOnlyLostClaims"}}},
	{name: "finish-no-fence", file: "internal/jobsql/sql/finish.sql",
		old: "AND j.fence = r.fence AND CASE WHEN j.state = 'running'", new: "AND CASE WHEN j.state = 'running'",
		tests: []testRun{{pkg: "./", run: "TestStaleWriteRefusedByFence/Finish"}, faultFence}},
	{name: "complete_tx-fence-always-true", file: "internal/jobsql/sql/complete.sql",
		old: "AND fence = $2 AND", new: "AND (fence = $2 OR true) AND",
		tests: []testRun{{pkg: "./", run: "TestStaleWriteRefusedByFence/CompleteTx|TestCompleteTx"}, faultFence}},
	{name: "heartbeat-no-fence", file: "internal/jobsql/sql/heartbeat.sql",
		old: "AND j.fence = h.fence", new: "",
		tests: []testRun{{pkg: "./", run: "TestStaleWriteRefusedByFence/Heartbeat|TestHeartbeat"}, faultFence}},
	{name: "output-no-fence", file: "internal/jobsql/sql/job_output.sql",
		old: "WHERE id = $1 AND fence = $2 AND state = 'running'", new: "WHERE id = $1 AND state = 'running'",
		tests: []testRun{{pkg: "./", run: "TestRecordOutput"}}},
	{name: "progress-no-fence", file: "internal/jobsql/sql/job_progress.sql",
		old: "WHERE id = $1 AND fence = $2 AND state = 'running'", new: "WHERE id = $1 AND state = 'running'",
		tests: []testRun{{pkg: "./", run: "TestRecordOutput"}}},
	{name: "check_fence-accepts-lower", file: "migrations/000002_fences.up.sql",
		old: "WHERE f.token <= excluded.token", new: "WHERE true",
		tests: []testRun{{pkg: "./", run: "TestCheckFenceTx"}, faultFence}},

	// The claim.
	{name: "claim-no-skip-locked", file: "internal/jobsql/sql/claim.sql",
		old: "    FOR UPDATE SKIP LOCKED\n), gate AS", new: "), gate AS",
		tests: []testRun{{pkg: "./", run: "TestClaimsExactlyOnce"}}},

	// The completer writes at once while its batches release dependents,
	// and gathers again after one that released none.
	{name: "completer-gathers-while-releasing", file: "internal/completer/completer.go",
		old: "	if k.settledN > 0 {\n		return false\n	}\n	k.mu.Lock()", new: "	k.mu.Lock()",
		tests: []testRun{{pkg: "./", run: "TestReleasingBatchesWriteAtOnce"}}},
	{name: "completer-never-gathers-again", file: "internal/completer/completer.go",
		old: "	if k.settledN > 0 {\n		return false", new: "	if k.settledN >= 0 {\n		return false",
		tests: []testRun{{pkg: "./", run: "TestReleasingBatchesWriteAtOnce"}}},

	// Gates (migrations/000018_workflow_gates.up.sql): a child behind a
	// gate is claimed only once its parent's completion opened it, the
	// gate opens only on a completion, and goes only when no child waits.
	{name: "claim-takes-closed-gates", file: "internal/jobsql/sql/claim.sql",
		old: "    WHERE g.queue = $1 AND g.opened_at IS NOT NULL\n", new: "    WHERE g.queue = $1\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates|TestWorkflowPlans/ClaimReadsNoBlockedJob"}}},
	{name: "settle-opens-failed-gates", file: "migrations/000019_workflow_settle_plans.up.sql",
		old: "coalesce(array_agg(p.id) FILTER (WHERE p.state = 'completed'), '{}'),", new: "coalesce(array_agg(p.id) FILTER (WHERE p.state <> 'deleted'), '{}'),",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/DiscardedParentCancelsAndRetryResumes"}}},
	{name: "claim-deletes-gates-with-waiting-children", file: "internal/jobsql/sql/claim.sql",
		old: "                       AND c.id NOT IN (SELECT id FROM gated)\n", new: "                       AND false\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/ChildLockedElsewhereKeepsTheGate"}}},
	{name: "claim-drain-check-compares-every-id", file: "internal/jobsql/sql/claim.sql",
		old: "                       AND c.id NOT IN (SELECT id FROM gated)\n", new: "                       AND c.id <> ALL (ARRAY(SELECT id FROM gated))\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowPlans/ClaimThatDrainsAGateHashesTheTaken"}}},
	{name: "claim-deletes-gates-with-later-children", file: "internal/jobsql/sql/claim.sql",
		old: "LIMIT 1) IS NOT NULL THEN false\n               WHEN", new: "LIMIT 1) IS NOT NULL THEN true\n               WHEN",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/FencedCompletionOpensTheGate"}}},
	{name: "retry-waits-for-an-opened-gate", file: "internal/jobsql/sql/job_retry.sql",
		old: "CASE WHEN pending_parents > 0 AND (gate_id IS NULL OR {{schema}}.gate_closed(gate_id, queue))", new: "CASE WHEN pending_parents > 0",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/CancelledChildRetriedAfterTheGate"}}},
	{name: "schedule-sweep-ignores-limits", file: "internal/jobsql/sql/schedule.sql",
		old: "    WHERE g.opened_at IS NOT NULL\n      AND (q.max_running", new: "    WHERE false\n      AND (q.max_running",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/LimitedQueue"}}},
	{name: "job_state-shows-rows", file: "migrations/000018_workflow_gates.up.sql",
		old: "                THEN 'available' ELSE state END", new: "                THEN state ELSE state END",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/FencedCompletionOpensTheGate|TestWorkflowGates/Readers"}}},

	// The rescue.
	{name: "rescue-no-outer-recheck", file: "internal/jobsql/sql/rescue.sql",
		old: "AND j.id = r.id AND j.fence = r.fence\n  AND j.state = 'running' AND j.lease_until < now()", new: "AND j.id = r.id",
		tests: []testRun{{pkg: "./", run: "TestRescuer"}}},
	{name: "rescue-no-fence-recheck", file: "internal/jobsql/sql/rescue.sql",
		old: "AND j.id = r.id AND j.fence = r.fence\n", new: "AND j.id = r.id\n",
		tests: []testRun{{pkg: "./", run: "TestRescuer"}}},
	{name: "rescue-no-recheck", file: "internal/jobsql/sql/rescue.sql",
		old:   "WHERE j.id = ANY (ARRAY(SELECT id FROM free)) AND j.id = r.id AND j.fence = r.fence\n  AND j.state = 'running' AND j.lease_until < now()",
		new:   "WHERE j.id = r.id",
		tests: []testRun{{pkg: "./", run: "TestRescuer"}}},
	{name: "rescue-keeps-fence", file: "internal/jobsql/sql/rescue.sql",
		old: "    fence = nextval('{{schema}}.fence_seq'),\n", new: "",
		tests: []testRun{{pkg: "./", run: "TestRescuer"}, faultFence}},

	// Locks: pglock's lease renewal and session keepalive, singletons.
	{name: "lease_renew-fence-always-true", file: "pglock/sql/lease_renew.sql",
		old: "AND fence = $2 AND", new: "AND (fence = $2 OR true) AND",
		tests: []testRun{{pkg: "./pglock/", run: "TestLeaseLock"}, {pkg: "./integration/", run: "TestLeaseStaleRenewal|TestLeaderProcesses"}}},
	{name: "session-keepalive-never-checks", file: "pglock/session.go",
		old:   "\t\tcase <-tick.C:\n\t\t}\n\t\tl.mu.Lock()\n\t\tctx, cancel := context.WithTimeout(l.ctx, timeout)",
		new:   "\t\tcase <-tick.C:\n\t\t\tcontinue\n\t\t}\n\t\tl.mu.Lock()\n\t\tctx, cancel := context.WithTimeout(l.ctx, timeout)",
		tests: []testRun{{pkg: "./pglock/", run: "TestSessionLock"}, {pkg: "./", run: "TestSingleton"}, {pkg: "./integration/", run: "TestSingletonProcesses"}}},
	{name: "session-keepalive-timeout-is-interval", file: "pglock/session.go",
		old: "ctx, cancel := context.WithTimeout(l.ctx, timeout)", new: "ctx, cancel := context.WithTimeout(l.ctx, interval)",
		tests: []testRun{{pkg: "./pglock/", run: "TestSessionLock/SlowAnswerKeepsTheLock"}}},
	{name: "elector-session-check-timeout-is-renew-interval", file: "pglock/elector.go",
		old: "answer <- s.check(checkCtx, e.cfg.SessionTimeout)", new: "answer <- s.check(checkCtx, e.cfg.RenewInterval)",
		tests: []testRun{{pkg: "./pglock/", run: "TestElectorSessionFailover/SlowSessionAnswerKeepsTheTerm"}}},
	{name: "singleton-xact-lock-per-job", file: "internal/executor/singleton.go",
		old: "r.locks.TryLockXact(ctx, tx, name)", new: "r.locks.TryLockXact(ctx, tx, fmt.Sprint(name, row.ID))",
		tests: []testRun{{pkg: "./", run: "TestSingleton"}, {pkg: "./integration/", run: "TestSingletonProcesses/xact"}}},
	{name: "singleton-session-lock-per-job", file: "internal/executor/singleton.go",
		old: "r.locks.TryLockSession(ctx, name, nil)", new: "r.locks.TryLockSession(ctx, fmt.Sprint(name, row.ID), nil)",
		tests: []testRun{{pkg: "./", run: "TestSingleton"}, {pkg: "./integration/", run: "TestSingletonProcesses/session"}}},

	// Cancelling running jobs.
	{name: "cancel-ends-running-job-at-once", file: "internal/jobsql/sql/job_cancel.sql",
		old:   "SET state = CASE WHEN j.state = 'running' THEN j.state ELSE 'cancelled' END",
		new:   "SET state = 'cancelled'",
		tests: []testRun{{pkg: "./", run: "TestJobCancel"}}},
	{name: "finish-ignores-cancel-request", file: "internal/jobsql/sql/finish.sql",
		old:   "WHEN r.op = 'cancel' OR j.cancel_requested_at IS NOT NULL THEN 'cancelled'",
		new:   "WHEN r.op = 'cancel' THEN 'cancelled'",
		tests: []testRun{{pkg: "./", run: "TestFinishHonoursCancelRequest|TestJobCancel"}}},
	{name: "finish-cancel-request-spends-no-attempt", file: "internal/jobsql/sql/finish.sql",
		old:   "IN ('snooze', 'release', 'unknown_kind') AND j.cancel_requested_at IS NULL THEN",
		new:   "IN ('snooze', 'release', 'unknown_kind') THEN",
		tests: []testRun{{pkg: "./", run: "TestFinishHonoursCancelRequest|TestJobCancel"}}},
	{name: "rescue-ignores-cancel-request", file: "internal/jobsql/sql/rescue.sql",
		old:   "state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'",
		new:   "state = CASE WHEN false THEN 'cancelled'",
		tests: []testRun{{pkg: "./", run: "TestJobCancel"}}},
	{name: "heartbeat-drops-cancel-flag", file: "internal/jobsql/sql/heartbeat.sql",
		old: "RETURNING j.id, j.cancel_requested_at IS NOT NULL", new: "RETURNING j.id, false",
		tests: []testRun{{pkg: "./", run: "TestJobCancel"}}},

	// Pausing queues.
	{name: "claim-ignores-pause", file: "internal/jobsql/sql/claim.sql",
		old:   "queue = $1\n      AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues\n                      WHERE name = $1 AND (paused_at IS NOT NULL OR max_running IS NOT NULL",
		new:   "queue = $1\n      AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues\n                      WHERE name = $1 AND (max_running IS NOT NULL",
		tests: []testRun{{pkg: "./", run: "TestQueuePause"}}},
	{name: "claim-gate-ignores-pause", file: "internal/jobsql/sql/claim.sql",
		old:   "g.opened_at IS NOT NULL\n      AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues\n                      WHERE name = $1 AND (paused_at IS NOT NULL OR max_running IS NOT NULL",
		new:   "g.opened_at IS NOT NULL\n      AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues\n                      WHERE name = $1 AND (max_running IS NOT NULL",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/PausedQueue"}}},

	// Flow control: a limited queue is claimed only by claim_flow.sql,
	// within its limits; a sequence's job only as its sequence's next.
	{name: "claim-takes-limited-queue", file: "internal/jobsql/sql/claim.sql",
		old:   " OR max_running IS NOT NULL\n                                           OR max_running_per_key IS NOT NULL OR rate_limit IS NOT NULL))\n      AND (sequence_key",
		new:   "\n                                           OR max_running_per_key IS NOT NULL OR rate_limit IS NOT NULL))\n      AND (sequence_key",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/MaxRunning$"}}},
	{name: "claim-ignores-sequence", file: "internal/jobsql/sql/claim.sql",
		old: "      AND (sequence_key IS NULL OR {{schema}}.sequence_next(queue, sequence_key, id))\n", new: "",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/Sequence|TestSequencesRunningClients"}}},
	{name: "claim-drops-meta", file: "internal/jobsql/sql/claim.sql",
		old: "pg_column_size(j.meta) > 8", new: "pg_column_size(j.meta) > 800",
		tests: []testRun{{pkg: "./", run: "TestClaimedRowAsStored/Claim$"}}},
	{name: "claim_flow-drops-errors", file: "internal/jobsql/sql/claim_flow.sql",
		old: "pg_column_size(j.errors) > 8", new: "pg_column_size(j.errors) > 800",
		tests: []testRun{{pkg: "./", run: "TestClaimedRowAsStored/ClaimFlow"}}},
	{name: "claim_id-drops-tags", file: "internal/jobsql/sql/claim_id.sql",
		old: "cardinality(j.tags) > 0", new: "cardinality(j.tags) > 2",
		tests: []testRun{{pkg: "./", run: "TestClaimedRowAsStored/WorkJob"}}},
	{name: "scan-null-meta-not-empty", file: "internal/jobsql/scan.go",
		old: "\tif meta == nil {\n\t\tmeta = []byte(emptyMeta)\n\t}\n", new: "",
		tests: []testRun{{pkg: "./", run: "TestClaimedRowAsStored|TestClaimRowDecoding"}}},
	{name: "claim_flow-ignores-max-running", file: "internal/jobsql/sql/claim_flow.sql",
		old: "q.max_running - (SELECT count(*) FROM running),", new: "q.max_running,",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/MaxRunning$|TestFlowLimitsRunningClients"}}},
	{name: "claim_flow-ignores-key-running", file: "internal/jobsql/sql/claim_flow.sql",
		old: "(c.rank <= (SELECT max_running_per_key FROM q) - coalesce(r.n, 0)) IS NOT FALSE", new: "(c.rank <= (SELECT max_running_per_key FROM q)) IS NOT FALSE",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/MaxRunningPerKey|TestFlowLimitsRunningClients"}}},
	{name: "claim_flow-claims-changed-job", file: "internal/jobsql/sql/claim_flow.sql",
		old: "(ARRAY(SELECT id FROM picked)) AND j.state = 'available'", new: "(ARRAY(SELECT id FROM picked))",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/JobCancelledDuringTheClaim"}}},
	{name: "claim_flow-forgets-rate", file: "internal/jobsql/sql/claim_flow.sql",
		old: "THEN q.rate_limit - (SELECT count(*)", new: "THEN q.rate_limit + 0 * (SELECT count(*)",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/Rate$"}}},
	{name: "poll-ignores-pause", file: "internal/jobsql/sql/poll.sql",
		old: "WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues p WHERE p.name = a.q AND p.paused_at IS NOT NULL)\n", new: "",
		tests: []testRun{{pkg: "./", run: "TestQueuePause"}}},
	{name: "claim-gate-probe-blind-to-locks", file: "internal/jobsql/sql/claim.sql",
		old: "ORDER BY c.priority, c.run_at, c.id LIMIT 1\n           FOR UPDATE SKIP LOCKED) IS NOT NULL", new: "ORDER BY c.priority, c.run_at, c.id LIMIT 1) IS NOT NULL",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/ClaimPassesAGateHeldByAnotherClaim"}}},
	{name: "poll-ignores-gates", file: "internal/jobsql/sql/poll.sql",
		old: "      WHERE (SELECT g.parent_id FROM {{schema}}.job_gates g", new: "      WHERE false AND (SELECT g.parent_id FROM {{schema}}.job_gates g",
		tests: []testRun{{pkg: "./", run: "TestWorkflowGates/PollFindsAnOpenGate"}}},
	// A blocked job holds its sequence; a batch cannot make a sequence wait
	// for itself.
	{name: "sequence_next-passes-blocked", file: "migrations/000016_sequence_held_by_blocked.up.sql",
		old: "e.state IN ('scheduled', 'available', 'blocked')", new: "e.state IN ('scheduled', 'available')",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/SequenceHeldByBlocked"}}},
	{name: "workflow-sequence-order-unchecked", file: "internal/enqueue/workflow.go",
		old: "if e.inBatch && int(e.parent) > i {", new: "if false && e.inBatch && int(e.parent) > i {",
		tests: []testRun{{pkg: "./", run: "TestClaimFlow/SequenceBatchListsParentsFirst"}}},
	// Claims keep a plan through the primary key, whatever the table's
	// size when the plan was made.
	{name: "claim_settings-seqscan-on", file: "internal/jobsql/sql/claim_settings.sql",
		old: "SELECT set_config('enable_seqscan', 'off', true)", new: "SELECT set_config('enable_seqscan', 'on', true)",
		tests: []testRun{{pkg: "./", run: "TestClaimPlanCachedOnSmallTable/locked=false"}}},
	{name: "claim_lock-seqscan-on", file: "internal/jobsql/sql/claim_lock.sql",
		old: "set_config('enable_seqscan', 'off', true)", new: "set_config('enable_seqscan', 'on', true)",
		tests: []testRun{{pkg: "./", run: "TestClaimPlanCachedOnSmallTable/locked=true"}}},
	// Lock order: jobs before queues, as migrations take them.
	{name: "claim_flow-locks-queues-first", file: "internal/jobsql/sql/claim_flow.sql",
		old: "    SELECT FROM {{schema}}.jobs WHERE false\n", new: "    SELECT WHERE false\n",
		tests: []testRun{{pkg: "./", run: "TestStatementsLockJobsFirst/claim_flow"}}},
	// Lock order: the calls on many jobs lock them in id order, as
	// completions do. The mutants write as before, in the plan's order
	// (the locking read, unreferenced, does not run).
	{name: "delete_many-locks-in-plan-order", file: "internal/jobsql/sql/job_delete_many.sql",
		old: "WHERE id = ANY (ARRAY(SELECT id FROM locked))", new: "WHERE id = ANY ($1::bigint[])",
		tests: []testRun{{pkg: "./", run: "TestManyJobCallsLockInIDOrder/JobDeleteManyTx"}}},
	{name: "retry_many-locks-in-plan-order", file: "internal/jobsql/sql/job_retry_many.sql",
		old: "WHERE id = ANY (ARRAY(SELECT id FROM locked))", new: "WHERE id = ANY ($1::bigint[])",
		tests: []testRun{{pkg: "./", run: "TestManyJobCallsLockInIDOrder/JobRetryManyTx"}}},
	{name: "cancel_many-locks-in-plan-order", file: "internal/jobsql/sql/job_cancel_many.sql",
		old: "WHERE j.id = ANY (ARRAY(SELECT id FROM locked))", new: "WHERE j.id = ANY ($1::bigint[])",
		tests: []testRun{{pkg: "./", run: "TestManyJobCallsLockInIDOrder/JobCancelManyTx"}}},

	// Retry and delete never touch a running job.
	{name: "retry-takes-running-job", file: "internal/jobsql/sql/job_retry.sql",
		old:   "WHERE id = $1 AND state IN ('scheduled', 'completed', 'discarded', 'cancelled')",
		new:   "WHERE id = $1 AND state IN ('scheduled', 'completed', 'discarded', 'cancelled', 'running')",
		tests: []testRun{{pkg: "./", run: "TestJobRetry"}}},
	// The many calls' mutants drop both filters: the write takes every id
	// given, and the locking read, unreferenced, does not run.
	{name: "retry_many-takes-running-job", file: "internal/jobsql/sql/job_retry_many.sql",
		old:   "WHERE id = ANY (ARRAY(SELECT id FROM locked)) AND state IN ('scheduled', 'completed', 'discarded', 'cancelled')",
		new:   "WHERE id = ANY ($1::bigint[]) AND state IN ('scheduled', 'completed', 'discarded', 'cancelled', 'running')",
		tests: []testRun{{pkg: "./", run: "TestJobRetry"}}},
	{name: "delete-takes-running-job", file: "internal/jobsql/sql/job_delete.sql",
		old: "WHERE id = $1 AND state <> 'running'", new: "WHERE id = $1",
		tests: []testRun{{pkg: "./", run: "TestJobDelete"}}},
	{name: "delete_many-takes-running-job", file: "internal/jobsql/sql/job_delete_many.sql",
		old: "WHERE id = ANY (ARRAY(SELECT id FROM locked)) AND state <> 'running'", new: "WHERE id = ANY ($1::bigint[])",
		tests: []testRun{{pkg: "./", run: "TestJobDelete"}}},

	// Unique jobs, the pruner, enqueue() in SQL.
	{name: "unique-index-over-every-state", file: "migrations/000004_unique_jobs.up.sql",
		old: "    WHERE unique_key IS NOT NULL AND state = ANY (unique_states);\n", new: "    WHERE unique_key IS NOT NULL;\n",
		tests: []testRun{{pkg: "./", run: "TestUnique"}}},
	{name: "retry-keeps-finalized_at", file: "internal/jobsql/sql/job_retry.sql",
		old: "        finalized_at        = NULL,\n", new: "",
		tests: []testRun{{pkg: "./", run: "TestJobRetry|TestPruner"}}},
	{name: "prune-cancelled-by-completed-retention", file: "internal/jobsql/sql/prune.sql",
		old: "WHEN 'cancelled' THEN finalized_at < now() - $3::bigint", new: "WHEN 'cancelled' THEN finalized_at < now() - $2::bigint",
		tests: []testRun{{pkg: "./", run: "TestPruner"}}},
	{name: "enqueue_sql-key-disagrees-with-go", file: "migrations/000006_enqueue_function.up.sql",
		old: "v        text := 'pgqueue-unique-1';", new: "v        text := 'pgqueue-unique-2';",
		tests: []testRun{{pkg: "./", run: "TestEnqueueSQL"}}},
	{name: "enqueue_sql-no-unique-conflict", file: "migrations/000006_enqueue_function.up.sql",
		old: "        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING\n", new: "",
		tests: []testRun{{pkg: "./", run: "TestEnqueueSQL"}}},

	// Workflows: only a fenced end releases, each edge once, by its policy.
	{name: "workflow-settle-resolves-edges-twice", file: "migrations/000019_workflow_settle_plans.up.sql",
		old: "WHERE d.parent_id = ANY (done_ids)\n              AND NOT d.resolved\n", new: "WHERE d.parent_id = ANY (done_ids)\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowFencedRelease"}}},
	{name: "workflow-settle-failure-resolves-every-edge", file: "migrations/000019_workflow_settle_plans.up.sql",
		old: "AND d.parent_id = ANY (failed_ids) AND d.on_failure = 'run'\n", new: "AND d.parent_id = ANY (failed_ids)\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowFailurePolicy"}}},
	// workflow_settle's statements are planned once, not for each
	// batch's arrays, and through indexes.
	{name: "workflow-settle-custom-plans", file: "migrations/000019_workflow_settle_plans.up.sql",
		old: "SET plan_cache_mode = force_generic_plan", new: "SET plan_cache_mode = force_custom_plan",
		tests: []testRun{{pkg: "./", run: "TestWorkflowPlans/BatchCompletionUsesIndexes"}}},
	{name: "workflow-settle-seqscan-on", file: "migrations/000019_workflow_settle_plans.up.sql",
		old: "SET enable_seqscan = off\n", new: "",
		tests: []testRun{{pkg: "./", run: "TestWorkflowPlans"}}},
	{name: "complete_many-settles-unfenced-jobs", file: "internal/jobsql/sql/complete_many.sql",
		old:   "    FROM done WHERE has_children HAVING count(*) > 0\n",
		new:   "    FROM (SELECT j.id, true AS has_children FROM {{schema}}.jobs j WHERE j.id = ANY ($1::bigint[])) done WHERE has_children HAVING count(*) > 0\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowFencedRelease"}}},
	// settled runs only when read: through the row that carries its count.
	{name: "complete_many-settled-not-read", file: "internal/jobsql/sql/complete_many.sql",
		old: "SELECT NULL::bigint AS id, (SELECT s FROM settled AS t(s)) AS settled", new: "SELECT NULL::bigint AS id, NULL::integer AS settled",
		tests: []testRun{{pkg: "./", run: "TestWorkflowDependencies/ChainReleasesOneStepAtATime|TestBatchWriteRefusesOnlyLostClaims"}}},
	{name: "workflow-cancel-policy-ignored", file: "migrations/000019_workflow_settle_plans.up.sql",
		old: "WHERE d.parent_id = ANY (failed_ids) AND d.on_failure = 'cancel' AND NOT d.resolved\n", new: "WHERE false\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowFailurePolicy"}}},
	{name: "workflow-retry-does-not-resume", file: "internal/jobsql/sql/job_retry.sql",
		old:   "    SELECT {{schema}}.workflow_resume(array_agg(id)) FROM retried WHERE has_children HAVING count(*) > 0\n",
		new:   "    SELECT 0 FROM retried WHERE false\n",
		tests: []testRun{{pkg: "./", run: "TestWorkflowFailurePolicy"}}},
	{name: "prune-ignores-waiting-children", file: "internal/jobsql/sql/prune.sql",
		old: "      AND (has_children IS NOT TRUE OR NOT EXISTS (\n          SELECT 1 FROM {{schema}}.job_deps", new: "      AND (true OR NOT EXISTS (\n          SELECT 1 FROM {{schema}}.job_deps",
		tests: []testRun{{pkg: "./", run: "TestWorkflowPrune"}}},
	{name: "prune-ignores-children-behind-a-gate", file: "internal/jobsql/sql/prune.sql",
		old: "           OR NOT EXISTS (SELECT 1 FROM {{schema}}.jobs c WHERE c.gate_id = jobs.id", new: "           OR true OR NOT EXISTS (SELECT 1 FROM {{schema}}.jobs c WHERE c.gate_id = jobs.id",
		tests: []testRun{{pkg: "./", run: "TestWorkflowPrune"}}},
	// QueueList counts blocked jobs.
	{name: "queue_list-misses-blocked", file: "internal/jobsql/sql/queue_list.sql",
		old: "    FROM {{schema}}.jobs WHERE state = 'blocked' AND gate_id IS NULL GROUP BY queue", new: "    FROM {{schema}}.jobs WHERE state = 'blocked' AND false GROUP BY queue",
		tests: []testRun{{pkg: "./", run: "TestQueuePause/QueueListCountsTheBacklog|TestQueueListReadsOnlyTheBacklog"}}},
	// Only a fenced completion releases dependents. The
	// mutant settles the refused completions of a batch too (the jobs
	// that had dependents when the statement began), besides the ones
	// that landed.
	{name: "complete_many-settles-refused-completions", file: "internal/jobsql/sql/complete_many.sql",
		old: "    SELECT {{schema}}.workflow_settle(array_agg(id), array_agg('completed'::text))\n    FROM done WHERE has_children HAVING count(*) > 0",
		new: "    SELECT {{schema}}.workflow_settle(array_agg(id), array_agg('completed'::text))\n    FROM (SELECT id FROM done WHERE has_children\n" +
			"          UNION SELECT j.id FROM r JOIN {{schema}}.jobs j ON j.id = r.id WHERE j.has_children) s HAVING count(*) > 0",
		tests: []testRun{{pkg: "./", run: "TestWorkflowFencedRelease/StaleCompletionReleasesNothing"}, {pkg: "./integration/", run: "TestFaultWorkflow$"}}},

	// claim.sql leaves out what the claimer knows; the claimer must fill
	// it in as stored.
	{name: "claim-fill-wrong-lease", file: "internal/producer/claim.go",
		old: "Lease: time.Duration(c.JobLease.Microseconds()) * time.Microsecond", new: "Lease: c.JobLease",
		tests: []testRun{{pkg: "./", run: "TestClaimedJobRowAsStored"}}},
	{name: "claim-fill-wrong-worker", file: "internal/producer/claim.go",
		old: "WorkerID: c.ClientID,", new: "WorkerID: \"\",",
		tests: []testRun{{pkg: "./", run: "TestClaimedJobRowAsStored"}}},

	// The schema watch says the schema is current again before letting
	// statements run: the mutant clears the error first and logs after
	// the lock, so a caller may see Err nil before the line.
	{name: "schemawatch-clears-before-log", file: "internal/schemawatch/watch.go",
		old:   "\tdefer w.mu.Unlock()\n\tif w.err != nil {\n\t\tw.Log.InfoContext(ctx, \"pgqueue: schema is current again; claims and maintenance resume\", \"schema\", w.Schema, \"version\", v.Version)\n\t}\n\tw.err, w.backoff, w.until = nil, 0, time.Time{}\n",
		new:   "\twas := w.err != nil\n\tw.err, w.backoff, w.until = nil, 0, time.Time{}\n\tw.mu.Unlock()\n\tif was {\n\t\tw.Log.InfoContext(ctx, \"pgqueue: schema is current again; claims and maintenance resume\", \"schema\", w.Schema, \"version\", v.Version)\n\t}\n",
		tests: []testRun{{pkg: "./internal/schemawatch/"}}},

	// Lock backends' fence counters.
	{name: "filelock-fence-not-incremented", file: "filelock/fenced.go",
		old: "\tn++\n", new: "",
		tests: []testRun{{pkg: "./filelock/"}}},
	{name: "filelock-counter-starts-at-zero", file: "filelock/fenced.go",
		old: "n := time.Now().UnixMicro()", new: "n := int64(0)",
		tests: []testRun{{pkg: "./filelock/"}}},
	{name: "redislock-fence-not-incremented", file: "redislock/lua/acquire.lua",
		old: "return redis.call('INCR', KEYS[2])", new: "return tonumber(redis.call('GET', KEYS[2]))",
		tests: []testRun{{dir: "redislock", pkg: "./"}}},
	{name: "redislock-renew-any-token", file: "redislock/lua/renew.lua",
		old: "if redis.call('GET', KEYS[1]) == ARGV[1] then", new: "if true then",
		tests: []testRun{{dir: "redislock", pkg: "./"}}},
}
