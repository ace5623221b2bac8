-- Periodic jobs: a row per periodic job name, written only by the
-- maintenance leader, in the transaction that enqueues the job's runs and
-- under this row's lock (sql/periodic_*.sql). last_instant only grows, so
-- an instant is enqueued at most once, across leader changes and restarts.
CREATE TABLE {{schema}}.periodic_jobs (
    name         text        PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 255),
    -- Every instant of the schedule up to this one is done: enqueued, or
    -- skipped as missed. A new row gets now(): nothing earlier is due.
    last_instant timestamptz NOT NULL,
    -- The last leader term that enqueued the job's run on start, if any.
    start_term   bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
