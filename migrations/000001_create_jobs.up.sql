-- {{schema}} is replaced with the quoted schema name when the migration is
-- applied (see migrate.go), so one set of files serves any schema.

CREATE SEQUENCE {{schema}}.fence_seq AS bigint;

CREATE TABLE {{schema}}.jobs (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue         text        NOT NULL CHECK (char_length(queue) BETWEEN 1 AND 128),
    kind          text        NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 255),
    args          jsonb       NOT NULL DEFAULT '{}',
    priority      smallint    NOT NULL DEFAULT 0,
    state         text        NOT NULL DEFAULT 'available'
                  CHECK (state IN ('scheduled', 'available', 'running', 'completed', 'discarded', 'cancelled')),
    attempt       integer     NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts  integer     NOT NULL DEFAULT 25 CHECK (max_attempts > 0),
    run_at        timestamptz NOT NULL DEFAULT now(),
    fence         bigint,
    lease_until   timestamptz,
    worker_id     text,
    errors        jsonb       NOT NULL DEFAULT '[]',
    tags          text[]      NOT NULL DEFAULT '{}',
    meta          jsonb       NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    attempted_at  timestamptz,
    finalized_at  timestamptz,
    -- A running job always carries the fence and lease of its claim.
    CONSTRAINT jobs_running_is_fenced CHECK (state <> 'running' OR (fence IS NOT NULL AND lease_until IS NOT NULL)),
    -- Final states, and only they, have a finalized_at.
    CONSTRAINT jobs_finalized_at CHECK ((state IN ('completed', 'discarded', 'cancelled')) = (finalized_at IS NOT NULL))
);

-- The fetch path reads only available rows, in claim order: future, retrying,
-- running and finished rows are outside this index and never slow a claim.
CREATE INDEX jobs_fetch_idx ON {{schema}}.jobs (queue, priority, run_at, id) WHERE state = 'available';

-- The scheduler moves due rows to available in run_at order.
CREATE INDEX jobs_scheduled_idx ON {{schema}}.jobs (run_at, id) WHERE state = 'scheduled';

-- The rescuer looks for running rows whose lease has expired.
CREATE INDEX jobs_running_lease_idx ON {{schema}}.jobs (lease_until) WHERE state = 'running';

-- Finished rows in the order they finished: for retention, which will
-- delete them by age (no pruner exists yet; the index is here so that adding
-- one needs no index build on a large table).
CREATE INDEX jobs_finalized_idx ON {{schema}}.jobs (finalized_at) WHERE finalized_at IS NOT NULL;
