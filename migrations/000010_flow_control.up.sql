-- Flow control (docs/concepts/flow-control.md): limits stored with the
-- queue, keys stored with the job. Every column is nullable without a
-- default, so adding them rewrites no row, and a queue or job that uses
-- none of them reads and writes exactly as before.

-- partition_key groups a queue's jobs for per-key limits; when null, the
-- queue's partition_by settings derive it from the kind and args.
-- sequence_key makes the jobs of one queue with the same key run one at a
-- time, in the order they were inserted.
ALTER TABLE {{schema}}.jobs
    ADD COLUMN partition_key text CHECK (char_length(partition_key) BETWEEN 1 AND 255),
    ADD COLUMN sequence_key  text CHECK (char_length(sequence_key) BETWEEN 1 AND 255);

-- A queue's limits; null means none. Claims of a queue with any limit run
-- claim_flow.sql under the queue's claim lock; claim.sql claims nothing
-- from it.
--   max_running          running jobs of the queue, across every client
--   max_running_per_key  running jobs per partition key
--   rate_limit           job starts per rate_period_us microseconds,
--                        of the queue or, with rate_per_key, of each key
--   partition_by_kind,   how a job without a partition_key gets one: its
--   partition_by_args    kind and/or these top-level args fields
--   sequence_continue    a discarded or cancelled job of a sequence lets
--                        the next one run (default: it holds the sequence)
ALTER TABLE {{schema}}.queues
    ADD COLUMN max_running         integer CHECK (max_running > 0),
    ADD COLUMN max_running_per_key integer CHECK (max_running_per_key > 0),
    ADD COLUMN rate_limit          integer CHECK (rate_limit > 0),
    ADD COLUMN rate_period_us      bigint  CHECK (rate_period_us > 0),
    ADD COLUMN rate_per_key        boolean NOT NULL DEFAULT false,
    ADD COLUMN partition_by_kind   boolean NOT NULL DEFAULT false,
    ADD COLUMN partition_by_args   text[]  NOT NULL DEFAULT '{}' CHECK (cardinality(partition_by_args) <= 4),
    ADD COLUMN sequence_continue   boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT queues_rate_whole CHECK ((rate_limit IS NULL) = (rate_period_us IS NULL));

-- flow_key is a job's partition key in a queue: its own, else the one its
-- queue derives from the kind and up to four top-level args fields (each
-- value's JSON text, joined by a unit separator), else null (no per-key
-- limit applies). One expression with no subquery, so the planner inlines
-- it into the claim.
CREATE FUNCTION {{schema}}.flow_key(partition_key text, kind text, args jsonb,
                                    by_kind boolean, by_args text[])
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN partition_key IS NOT NULL THEN partition_key
        WHEN NOT by_kind AND cardinality(by_args) = 0 THEN NULL
        ELSE concat_ws(chr(31),
            CASE WHEN by_kind THEN kind END,
            CASE WHEN cardinality(by_args) >= 1 THEN coalesce(args -> by_args[1], 'null')::text END,
            CASE WHEN cardinality(by_args) >= 2 THEN coalesce(args -> by_args[2], 'null')::text END,
            CASE WHEN cardinality(by_args) >= 3 THEN coalesce(args -> by_args[3], 'null')::text END,
            CASE WHEN cardinality(by_args) >= 4 THEN coalesce(args -> by_args[4], 'null')::text END)
    END
$$;

-- sequence_next reports whether job id may start now as its sequence's
-- next job: only under the queue's claim lock (claim_lock.sql notes it in
-- pgqueue.claim_locked), so that the snapshot it reads already holds every
-- earlier claim of the queue; while no job of the sequence runs; and when
-- no earlier job of it waits to run, or, unless the queue says
-- sequence_continue, ended discarded or cancelled. Called by the claims
-- for jobs with a sequence_key only.
CREATE FUNCTION {{schema}}.sequence_next(queue text, sequence_key text, id bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT current_setting('pgqueue.claim_locked', true) = queue
       AND NOT EXISTS (
           SELECT 1 FROM {{schema}}.jobs e
           WHERE e.queue = sequence_next.queue AND e.sequence_key = sequence_next.sequence_key
             AND e.state <> 'completed' AND e.id <> sequence_next.id
             AND (e.state = 'running'
                  OR (e.id < sequence_next.id
                      AND (e.state IN ('scheduled', 'available')
                           OR NOT coalesce((SELECT q.sequence_continue FROM {{schema}}.queues q
                                            WHERE q.name = sequence_next.queue), false)))))
$$;

-- The recent starts of each rate-limited queue ('' when the rate is the
-- queue's) or partition key: at most rate_limit entries within the last
-- rate_period_us, kept by the claims that start jobs.
CREATE TABLE {{schema}}.flow_rates (
    queue  text NOT NULL,
    key    text NOT NULL,
    starts timestamptz[] NOT NULL,
    PRIMARY KEY (queue, key)
);

-- Running jobs by queue, replacing jobs_running_lease_idx: a limited
-- queue's claim counts them (and reads their keys) on every claim. One
-- index of running rows, not two: every claim and every result adds or
-- leaves an entry in each, so a second would cost every queue, limited or
-- not. The rescuer, which looked for expired leases in lease_until order,
-- now reads all running entries (at most the workers' slots) and sorts the
-- expired ones.
DROP INDEX {{schema}}.jobs_running_lease_idx;
CREATE INDEX jobs_running_idx ON {{schema}}.jobs (queue, lease_until) WHERE state = 'running';

-- The jobs of a sequence that can still run or hold it: the claim's check
-- that a job is its sequence's next reads only these.
CREATE INDEX jobs_sequence_idx ON {{schema}}.jobs (queue, sequence_key, id)
    WHERE sequence_key IS NOT NULL AND state <> 'completed';
