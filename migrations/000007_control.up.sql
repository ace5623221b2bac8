-- Control of jobs and queues from outside the handler (see
-- docs/design.md, "Cancelling a running job" and "Pausing queues").

-- cancel_requested_at is set by JobCancel on a running job: its holder is
-- told and cancels the handler, and whatever result lands next ends the job
-- cancelled instead of retrying it; a rescued one is finalized cancelled.
-- It never touches the claim's fence or lease.
-- output and progress are JSON a handler records under its fence.
-- Columns without a default: adding them rewrites nothing.
ALTER TABLE {{schema}}.jobs
    ADD COLUMN cancel_requested_at timestamptz,
    ADD COLUMN output jsonb,
    ADD COLUMN progress jsonb;

-- queues holds what is said about a queue as a whole. A row exists only for
-- a queue that was ever paused or resumed: jobs do not need one. A paused
-- queue (paused_at set) is not claimed from by any client.
CREATE TABLE {{schema}}.queues (
    name       text        PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 128),
    paused_at  timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
