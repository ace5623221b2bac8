-- rescue_candidates: running jobs whose lease has expired, oldest first.
-- Read without locks: rescue.sql re-checks everything it read.
SELECT id, fence, attempt
FROM {{schema}}.jobs
WHERE state = 'running' AND lease_until < now()
ORDER BY lease_until
LIMIT $1
