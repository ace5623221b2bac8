//go:build soak && unix

package integration_test

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// soakAppPrefix is the application_name prefix of the soakworkers'
// sessions; the rest is the worker's name, which is also its client ID.
const soakAppPrefix = "soakworker-"

// soakSchema is created in the soak run's database after the migrations:
// the fault suite's audit (effects, refusals, claims, foreign writes) and
// what the features need to be checked after the pruner deleted the jobs:
// every insert, every state change, and a copy of every deleted row.
const soakSchema = `
CREATE TABLE effects (
    id     bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence  bigint NOT NULL,
    worker text   NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX effects_job_idx ON effects (job_id);

CREATE TABLE refusals (
    id     bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence  bigint NOT NULL,
    worker text   NOT NULL,
    reason text   NOT NULL,
    error  text,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- claims: every fence a job is given (claim or rescue), in the transaction
-- that gives it. stmt_at is when the statement that gave it started: a
-- claim whose statement started after a pause committed must see it.
CREATE TABLE claims (
    seq     bigserial PRIMARY KEY,
    job_id  bigint NOT NULL,
    fence   bigint,
    state   text NOT NULL,
    queue   text NOT NULL,
    boot    timestamptz NOT NULL DEFAULT pg_postmaster_start_time(),
    stmt_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX claims_job_idx ON claims (job_id, seq);

CREATE FUNCTION audit_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO claims (job_id, fence, state, queue) VALUES (NEW.id, NEW.fence, NEW.state, NEW.queue);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_fence_audit
    AFTER UPDATE OF fence ON pgqueue.jobs
    FOR EACH ROW WHEN (NEW.fence IS DISTINCT FROM OLD.fence)
    EXECUTE FUNCTION audit_fence();

-- foreign_writes: every change to a running job that keeps its fence made
-- by a session other than its holder's, but for JobCancel's request
-- (cancel_requested_at alone), which any session may make.
CREATE TABLE foreign_writes (
    id        bigserial PRIMARY KEY,
    job_id    bigint NOT NULL,
    fence     bigint,
    holder    text,
    writer    text,
    old_state text,
    new_state text,
    old_lease timestamptz,
    new_lease timestamptz,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION audit_foreign_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(OLD) - 'cancel_requested_at' <> to_jsonb(NEW) - 'cancel_requested_at' THEN
        INSERT INTO foreign_writes (job_id, fence, holder, writer, old_state, new_state, old_lease, new_lease)
        VALUES (OLD.id, OLD.fence, OLD.worker_id, current_setting('application_name'), OLD.state, NEW.state, OLD.lease_until, NEW.lease_until);
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_foreign_write
    AFTER UPDATE ON pgqueue.jobs
    FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.fence IS NOT DISTINCT FROM OLD.fence
                       AND current_setting('application_name') IS DISTINCT FROM '` + soakAppPrefix + `' || OLD.worker_id)
    EXECUTE FUNCTION audit_foreign_write();

-- enqueued: every job ever inserted, which the pruner does not touch.
CREATE TABLE enqueued (
    job_id     bigint PRIMARY KEY,
    kind       text NOT NULL,
    queue      text NOT NULL,
    batch      bigint,
    unique_key bytea,
    app        text NOT NULL DEFAULT current_setting('application_name'),
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX enqueued_batch_idx ON enqueued (batch);
CREATE FUNCTION audit_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO enqueued (job_id, kind, queue, batch, unique_key)
    VALUES (NEW.id, NEW.kind, NEW.queue, (NEW.args->>'batch')::bigint, NEW.unique_key);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_insert_audit AFTER INSERT ON pgqueue.jobs
    FOR EACH ROW EXECUTE FUNCTION audit_insert();

-- transitions: every change of state, in the order the changes were made.
CREATE TABLE transitions (
    seq       bigserial PRIMARY KEY,
    job_id    bigint NOT NULL,
    old_state text NOT NULL,
    new_state text NOT NULL,
    fence     bigint,
    app       text NOT NULL DEFAULT current_setting('application_name'),
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX transitions_job_idx ON transitions (job_id, seq);
CREATE FUNCTION audit_state() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO transitions (job_id, old_state, new_state, fence) VALUES (NEW.id, OLD.state, NEW.state, NEW.fence);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_state_audit AFTER UPDATE OF state ON pgqueue.jobs
    FOR EACH ROW WHEN (NEW.state IS DISTINCT FROM OLD.state)
    EXECUTE FUNCTION audit_state();

-- pruned: a copy of every deleted job, with who deleted it and when.
CREATE TABLE pruned AS
    SELECT j.*, clock_timestamp() AS pruned_at, current_setting('application_name') AS pruned_by
    FROM pgqueue.jobs j WITH NO DATA;
CREATE UNIQUE INDEX pruned_id_idx ON pruned (id);
CREATE FUNCTION audit_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pruned SELECT (OLD).*, clock_timestamp(), current_setting('application_name');
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_delete_audit AFTER DELETE ON pgqueue.jobs
    FOR EACH ROW EXECUTE FUNCTION audit_delete();

-- jobs_all: the jobs as they are, or were when pruned.
CREATE VIEW jobs_all AS
    SELECT id, queue, kind, args, state, attempt, max_attempts, fence, errors, cancel_requested_at,
           finalized_at, singleton_key, unique_key, worker_id, lease_until, false AS pruned
    FROM pgqueue.jobs
    UNION ALL
    SELECT id, queue, kind, args, state, attempt, max_attempts, fence, errors, cancel_requested_at,
           finalized_at, singleton_key, unique_key, worker_id, lease_until, true
    FROM pruned;

-- What the soakworkers and the driver record.
CREATE TABLE snoozes (
    job_id bigint NOT NULL,
    fence  bigint NOT NULL,
    worker text   NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX snoozes_job_idx ON snoozes (job_id);
CREATE TABLE spans (
    id         bigserial PRIMARY KEY,
    job_id     bigint      NOT NULL,
    key        text        NOT NULL,
    kind       text        NOT NULL,
    worker     text        NOT NULL,
    fence      bigint      NOT NULL,
    lock_fence bigint      NOT NULL,
    started    timestamptz NOT NULL,
    ended      timestamptz NOT NULL
);
-- batches: each of the driver's inserts, written in the same transaction.
CREATE TABLE batches (
    id         bigint PRIMARY KEY,
    inserted   bigint NOT NULL,
    duplicates bigint NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);
-- cancels: each JobCancel that returned, with the job as it returned it.
CREATE TABLE cancels (
    id           bigserial PRIMARY KEY,
    job_id       bigint NOT NULL,
    state        text   NOT NULL,
    fence        bigint,
    requested_at timestamptz,
    finalized_at timestamptz
);
-- pauses: windows, by the database clock, inside which the queue was
-- surely paused: from after QueuePause returned to before QueueResume ran.
CREATE TABLE pauses (
    id          bigserial PRIMARY KEY,
    queue       text NOT NULL,
    paused_from timestamptz NOT NULL,
    paused_to   timestamptz NOT NULL
);
CREATE TABLE periodic_inserts (
    job_id  bigint      NOT NULL,
    name    text        NOT NULL,
    instant timestamptz NOT NULL,
    run     text        NOT NULL,
    app     text        NOT NULL DEFAULT current_setting('application_name'),
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION audit_periodic() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO periodic_inserts (job_id, name, instant, run)
    VALUES (NEW.id, NEW.meta->'periodic'->>'name', (NEW.meta->'periodic'->>'instant')::timestamptz, NEW.meta->'periodic'->>'run');
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_periodic_audit AFTER INSERT ON pgqueue.jobs
    FOR EACH ROW WHEN (NEW.meta ? 'periodic') EXECUTE FUNCTION audit_periodic();
`

// soakInvariant is a query whose rows, if any, are violations, and one
// that counts what it looked at.
type soakInvariant struct {
	name  string
	query string
	over  string // counts what was checked; "" if nothing to count
	// retention: the query takes the workers' retention, in
	// microseconds, as $1.
	retention bool
}

// faultLostName is the fault suite's "no job lost" invariant, which the
// soak run replaces: jobs may be cancelled and pruned there.
const faultLostName = "no job lost: every job completed, or discarded with its errors"

// soakFaultOver counts what each of the fault suite's invariants looks at.
var soakFaultOver = map[string]string{
	"each completed job has exactly one effect, with the job's final fence":                          `SELECT count(*) FROM jobs_all WHERE state = 'completed'`,
	"no job has more than one effect":                                                                `SELECT count(DISTINCT job_id) FROM effects`,
	"no effect carries a stale fence (every effect has its job's final fence and the job completed)": `SELECT count(*) FROM effects`,
	"no write refused as stale took effect":                                                          `SELECT count(*) FROM refusals WHERE reason IN ('stale-fence', 'lease-lost')`,
	"no write to a running job came from a session other than its holder's":                          `SELECT count(*) FROM transitions WHERE old_state = 'running'`,
	"each job's fences grow strictly, in the order they were given":                                  `SELECT count(*) FROM claims`,
	"no fence is given twice":                                                                        `SELECT count(*) FROM claims`,
	"no two jobs hold the same fence":                                                                `SELECT count(*) FROM jobs_all WHERE fence IS NOT NULL`,
	"each job's fence is the last one the audit saw given":                                           `SELECT count(*) FROM jobs_all`,
}

// soakInvariants returns the fault suite's invariants over every job,
// pruned or not (jobs_all for pgqueue.jobs), its "no job lost" replaced,
// then the features' own.
func soakInvariants() []soakInvariant {
	out := []soakInvariant{
		{name: "no job lost: every job inserted still exists or was pruned, once", query: `
			SELECT format('job %s (%s, batch %s) inserted at %s: %s', e.job_id, e.kind, e.batch, e.at,
			              CASE WHEN count(j.id) = 0 THEN 'gone, never pruned' ELSE count(j.id) || ' rows' END)
			FROM enqueued e LEFT JOIN jobs_all j ON j.id = e.job_id
			GROUP BY e.job_id, e.kind, e.batch, e.at HAVING count(j.id) <> 1 ORDER BY e.job_id`,
			over: `SELECT count(*) FROM enqueued`},
		{name: "no job lost: every job is final: completed, cancelled, or discarded with its errors", query: `
			SELECT format('job %s (%s): state %s, attempt %s/%s, pruned %s, errors %s', id, kind, state, attempt, max_attempts, pruned, errors)
			FROM jobs_all
			WHERE NOT (state IN ('completed', 'cancelled') OR (state = 'discarded' AND jsonb_array_length(errors) > 0))
			ORDER BY id`,
			over: `SELECT count(*) FROM jobs_all`},
		{name: "no job lost: each committed batch's jobs are all there, and nothing else was inserted", query: `
			SELECT format('batch %s: %s inserted, %s recorded', b.id, b.inserted, (SELECT count(*) FROM enqueued e WHERE e.batch = b.id))
			FROM batches b WHERE b.inserted <> (SELECT count(*) FROM enqueued e WHERE e.batch = b.id)
			UNION ALL
			SELECT format('job %s (%s, batch %s) inserted by %s: neither in a committed batch nor a periodic run', e.job_id, e.kind, e.batch, e.app)
			FROM enqueued e
			WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = e.batch)
			  AND NOT EXISTS (SELECT 1 FROM periodic_inserts p WHERE p.job_id = e.job_id)`,
			over: `SELECT count(*) FROM batches`},
	}
	for _, inv := range faultInvariants {
		if inv.name == faultLostName {
			continue
		}
		out = append(out, soakInvariant{name: inv.name, query: strings.ReplaceAll(inv.query, "pgqueue.jobs", "jobs_all"), over: soakFaultOver[inv.name]})
	}
	return append(out, soakFeatureInvariants...)
}

// soakFeatureInvariants are the features' invariants.
var soakFeatureInvariants = []soakInvariant{
	{name: "no job leaves a final state (a cancelled job never completes afterwards)", query: `
		SELECT format('job %s: %s -> %s at %s by %s (fence %s)', job_id, old_state, new_state, at, app, fence)
		FROM transitions WHERE old_state IN ('completed', 'cancelled', 'discarded') ORDER BY seq`,
		over: `SELECT count(*) FROM transitions WHERE new_state IN ('completed', 'cancelled', 'discarded')`},
	{name: "retries: each completed job with planned failures completed after them, its errors kept", query: `
		SELECT format('job %s: fail %s, completed at attempt %s with %s errors', id, args->>'fail', attempt, jsonb_array_length(errors))
		FROM jobs_all
		WHERE state = 'completed' AND (args->>'fail')::int > 0
		  AND (attempt <= (args->>'fail')::int OR jsonb_array_length(errors) < (args->>'fail')::int)
		ORDER BY id`,
		over: `SELECT count(*) FROM jobs_all WHERE state = 'completed' AND (args->>'fail')::int > 0`},
	{name: "retries: each job discarded after planned failures failed every attempt it had", query: `
		SELECT format('job %s: discarded at attempt %s/%s with %s errors', id, attempt, max_attempts, jsonb_array_length(errors))
		FROM jobs_all
		WHERE state = 'discarded' AND (attempt < max_attempts OR jsonb_array_length(errors) < max_attempts)
		ORDER BY id`,
		over: `SELECT count(*) FROM jobs_all WHERE state = 'discarded'`},
	{name: "snoozes: each completed job with planned snoozes snoozed that often first", query: `
		SELECT format('job %s: snooze %s, %s snoozes recorded', j.id, j.args->>'snooze', (SELECT count(*) FROM snoozes s WHERE s.job_id = j.id))
		FROM jobs_all j
		WHERE j.state = 'completed' AND (j.args->>'snooze')::int > 0
		  AND (SELECT count(*) FROM snoozes s WHERE s.job_id = j.id) < (j.args->>'snooze')::int
		ORDER BY j.id`,
		over: `SELECT count(*) FROM jobs_all WHERE state = 'completed' AND (args->>'snooze')::int > 0`},
	{name: "singletons: each completed singleton job has exactly one span, under its final fence", query: `
		SELECT format('job %s (%s, key %s, fence %s): %s spans', j.id, j.kind, j.singleton_key, j.fence, count(s.id))
		FROM jobs_all j LEFT JOIN spans s ON s.job_id = j.id
		WHERE j.singleton_key IS NOT NULL AND j.state = 'completed'
		GROUP BY j.id, j.kind, j.singleton_key, j.fence
		HAVING count(s.id) <> 1 OR bool_or(s.fence IS DISTINCT FROM j.fence)
		ORDER BY j.id`,
		over: `SELECT count(*) FROM jobs_all WHERE singleton_key IS NOT NULL AND state = 'completed'`},
	{name: "singletons: no two runs of one key overlap (clock_timestamp() spans)", query: `
		SELECT format('key %s: job %s by %s [%s, %s] lock fence %s starts before an earlier run of the key ended (%s)',
		              key, job_id, worker, started, ended, lock_fence, prev_end)
		FROM (SELECT *, max(ended) OVER (PARTITION BY key ORDER BY started, id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
		      FROM spans) s
		WHERE started <= prev_end
		ORDER BY key, started`,
		over: `SELECT count(*) FROM spans`},
	{name: "singletons: each key's runs, in time order, hold increasing lock fences", query: `
		SELECT format('key %s: job %s lock fence %s at %s after lock fence %s', key, job_id, lock_fence, started, prev)
		FROM (SELECT *, lag(lock_fence) OVER (PARTITION BY key ORDER BY started, id) AS prev FROM spans) s
		WHERE lock_fence <= prev
		ORDER BY key, started`,
		over: `SELECT count(DISTINCT key) FROM spans`},
	{name: "unique: never two live jobs with one unique key", query: `
		WITH live AS (
			SELECT e.job_id, e.unique_key, e.at AS live_from,
			       coalesce((SELECT min(t.at) FROM transitions t WHERE t.job_id = e.job_id
			                 AND t.new_state IN ('completed', 'cancelled', 'discarded')), 'infinity') AS live_to
			FROM enqueued e WHERE e.unique_key IS NOT NULL)
		SELECT format('job %s live [%s, %s] while another job of its key was live until %s', job_id, live_from, live_to, prev_to)
		FROM (SELECT *, max(live_to) OVER (PARTITION BY unique_key ORDER BY live_from, job_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_to
		      FROM live) l
		WHERE live_from <= prev_to
		ORDER BY job_id`,
		over: `SELECT count(*) FROM enqueued WHERE unique_key IS NOT NULL`},
	{name: "periodic: each instant enqueued at most once", query: `
		SELECT format('%s instant %s (%s) enqueued %s times: jobs %s', name, instant, run, count(*), string_agg(job_id::text, ', '))
		FROM periodic_inserts GROUP BY name, instant, run HAVING count(*) > 1 ORDER BY instant`,
		over: `SELECT count(*) FROM periodic_inserts`},
	{name: "periodic: every run is a scheduled whole second, enqueued once due", query: `
		SELECT format('job %s: %s run for %s enqueued at %s', job_id, run, instant, at)
		FROM periodic_inserts
		WHERE run <> 'scheduled' OR instant <> date_trunc('second', instant) OR at < instant
		ORDER BY at`,
		over: `SELECT count(*) FROM periodic_inserts`},
	{name: "cancels: a job JobCancel found waiting ended cancelled, without an effect, never claimed again", query: `
		SELECT format('job %s cancelled waiting (fence %s): now %s, fence %s, effects %s, claims after %s',
		              c.job_id, c.fence, j.state, j.fence, (SELECT count(*) FROM effects e WHERE e.job_id = c.job_id),
		              (SELECT count(*) FROM claims k WHERE k.job_id = c.job_id AND k.state = 'running' AND k.fence > coalesce(c.fence, 0)))
		FROM cancels c JOIN jobs_all j ON j.id = c.job_id
		WHERE c.state = 'cancelled' AND c.requested_at IS NULL
		  AND (j.state <> 'cancelled'
		       OR EXISTS (SELECT 1 FROM effects e WHERE e.job_id = c.job_id)
		       OR EXISTS (SELECT 1 FROM claims k WHERE k.job_id = c.job_id AND k.state = 'running' AND k.fence > coalesce(c.fence, 0)))
		ORDER BY c.id`,
		over: `SELECT count(*) FROM cancels WHERE state = 'cancelled' AND requested_at IS NULL`},
	{name: "cancels: a running job whose cancel was requested ended cancelled or completed, never claimed again", query: `
		SELECT format('job %s cancel requested at fence %s: now %s, fence %s, cancel_requested_at %s, claims after %s',
		              c.job_id, c.fence, j.state, j.fence, j.cancel_requested_at,
		              (SELECT count(*) FROM claims k WHERE k.job_id = c.job_id AND k.state = 'running' AND k.fence > c.fence))
		FROM cancels c JOIN jobs_all j ON j.id = c.job_id
		WHERE c.state = 'running'
		  AND (j.state NOT IN ('cancelled', 'completed') OR j.cancel_requested_at IS NULL
		       OR EXISTS (SELECT 1 FROM claims k WHERE k.job_id = c.job_id AND k.state = 'running' AND k.fence > c.fence))
		ORDER BY c.id`,
		over: `SELECT count(*) FROM cancels WHERE state = 'running'`},
	{name: "cancels: no cancelled job has an effect", query: `
		SELECT format('job %s cancelled (fence %s): effect under fence %s by %s', j.id, j.fence, e.fence, e.worker)
		FROM jobs_all j JOIN effects e ON e.job_id = j.id WHERE j.state = 'cancelled' ORDER BY j.id`,
		over: `SELECT count(*) FROM jobs_all WHERE state = 'cancelled'`},
	{name: "pauses: no job of a paused queue was claimed by a statement that started while it was paused", query: `
		SELECT format('job %s of %s claimed at fence %s by a statement of %s, inside the pause [%s, %s]', k.job_id, k.queue, k.fence, k.stmt_at, p.paused_from, p.paused_to)
		FROM claims k JOIN pauses p ON p.queue = k.queue AND k.stmt_at > p.paused_from AND k.stmt_at < p.paused_to
		WHERE k.state = 'running'
		ORDER BY k.seq`,
		over: `SELECT count(*) FROM pauses`},
	{name: "pruning: only final jobs past their retention were deleted, by a worker", retention: true, query: `
		SELECT format('job %s (%s) deleted at %s by %s, finalized at %s', id, state, pruned_at, pruned_by, finalized_at)
		FROM pruned
		WHERE state NOT IN ('completed', 'cancelled', 'discarded') OR finalized_at IS NULL
		   OR pruned_at - finalized_at < $1::bigint * interval '1 microsecond'
		   OR pruned_by NOT LIKE '` + soakAppPrefix + `%'
		ORDER BY id`,
		over: `SELECT count(*) FROM pruned`},
}

// soakCheck runs every invariant, prints one line each, and returns the
// violations.
func (e *soakEnv) soakCheck(ctx context.Context) []string {
	var violations []string
	for _, inv := range soakInvariants() {
		var args []any
		if inv.retention {
			args = append(args, e.retention.Microseconds())
		}
		began := time.Now()
		rows := e.evidence(ctx, inv.query, args...)
		over := "-"
		if inv.over != "" {
			n, err := e.count(ctx, inv.over)
			if err != nil {
				over = "error: " + err.Error()
			} else {
				over = fmt.Sprint(n)
			}
		}
		e.say("SOAK INVARIANT violations=%d checked=%s (%s) %s", len(rows), over, time.Since(began).Round(time.Millisecond), inv.name)
		if len(rows) > 0 {
			shown := rows[:min(len(rows), 10)]
			violations = append(violations, fmt.Sprintf("%s: %d violations, e.g.\n    %s", inv.name, len(rows), strings.Join(shown, "\n    ")))
		}
	}
	return violations
}
