-- job_progress: store the progress a handler recorded for its job ($3,
-- JSON), fenced like job_output.sql.
UPDATE {{schema}}.jobs
SET progress = $3::jsonb
WHERE id = $1 AND fence = $2 AND state = 'running'
RETURNING id
