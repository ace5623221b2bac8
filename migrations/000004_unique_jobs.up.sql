-- Unique jobs: a job inserted with InsertOpts.Unique carries a key, and at
-- most one job per key exists among the jobs whose state is in their own
-- unique_states. The unique index enforces it, so inserts racing from many
-- processes leave exactly one row; inserts use ON CONFLICT DO NOTHING.
-- unique_states always holds every state a job can move between by itself
-- (scheduled, available, running), so a job never enters the index by a
-- transition of its own: only a final state can be left out.
ALTER TABLE {{schema}}.jobs
    ADD COLUMN unique_key bytea,
    ADD COLUMN unique_states text[];

CREATE UNIQUE INDEX jobs_unique_idx ON {{schema}}.jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state = ANY (unique_states);

-- unique_key finishes a job's key: base is the hash of what the job is
-- unique by (kind, and queue and args as asked, computed by the client or
-- given to enqueue()); a period of period_us microseconds adds the number of
-- the period that holds at, counted from the Unix epoch, so one job per
-- period is allowed. The same function serves every insert path, so keys
-- agree whatever inserted the job.
CREATE FUNCTION {{schema}}.unique_key(base bytea, period_us bigint, at timestamptz)
RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN base IS NULL THEN NULL
        WHEN period_us IS NULL OR period_us <= 0 THEN base
        ELSE sha256(base || int8send(floor(extract(epoch FROM at) * 1000000 / period_us)::bigint))
    END
$$;
