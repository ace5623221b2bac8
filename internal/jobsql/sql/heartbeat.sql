-- heartbeat: extend the leases of a client's running jobs, each only while
-- the client still holds its fence. The ids returned are the jobs still
-- held; any other job of the batch was lost. The flag says whether
-- JobCancel asked for the job to be cancelled: the fallback for a client
-- that missed, or does not listen for, the control notification.
UPDATE {{schema}}.jobs j
SET lease_until = now() + $3::bigint * interval '1 microsecond'
FROM unnest($1::bigint[], $2::bigint[]) AS h(id, fence)
-- The state is tested inside a CASE, as in complete_many.sql: after an
-- ANALYZE of a quiet queue the planner otherwise read every running row
-- of jobs_running_idx for each heartbeat (240,400 plan rows for 200 jobs
-- beside 100,000 running). The jobs are found through the primary key.
WHERE j.id = ANY ($1::bigint[]) AND j.id = h.id AND j.fence = h.fence AND CASE WHEN j.state = 'running' THEN true END
RETURNING j.id, j.cancel_requested_at IS NOT NULL
