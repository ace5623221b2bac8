-- lock_jobs: hold the demo's jobs table alone until the transaction ends,
-- so that no job is enqueued between the check for foreign jobs and the
-- TRUNCATE.
LOCK TABLE {{schema}}.jobs IN ACCESS EXCLUSIVE MODE
