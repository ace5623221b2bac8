-- raw_complete: the raw ceiling's completion: one fenced statement per batch
-- of ids $1 with their fences $2. The batch is found through the primary
-- key, as complete_many.sql finds it (the state tested inside a CASE):
-- with a plain state = 'running' the planner read all of jobs_running_idx
-- instead, cheaper while every running job is in the batch (this loop's
-- case) and a scan of every running job per batch once an ANALYZE taken
-- while the queue was quiet says none runs, a plan pgqueue gave up for
-- that reason. The ceiling then measured that plan's saving, not the
-- library's overhead: about 2 µs of server CPU per job.
UPDATE {{schema}}.jobs j
SET state = 'completed', finalized_at = now(), lease_until = NULL
FROM unnest($1::bigint[], $2::bigint[]) AS c(id, fence)
WHERE j.id = ANY ($1::bigint[]) AND j.id = c.id AND j.fence = c.fence AND CASE WHEN j.state = 'running' THEN true END
