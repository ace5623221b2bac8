-- complete: finish a running job, only if the caller still holds its fence.
UPDATE {{schema}}.jobs
SET state = 'completed', finalized_at = now(), lease_until = NULL
WHERE id = $1 AND fence = $2 AND state = 'running'
