-- periodic_describe: record periodic job $1's schedule text $2 and next
-- instant $3 for operators, only when they changed (no write per pass).
UPDATE {{schema}}.periodic_jobs
SET schedule = $2, next_at = $3
WHERE name = $1 AND (schedule IS DISTINCT FROM $2 OR next_at IS DISTINCT FROM $3)
