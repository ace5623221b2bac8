-- job_output: store the output a handler recorded for its job ($3, JSON),
-- only while the job still runs under the handler's fence $2. No row back
-- means the claim was lost: the write is refused.
UPDATE {{schema}}.jobs
SET output = $3::jsonb
WHERE id = $1 AND fence = $2 AND state = 'running'
RETURNING id
