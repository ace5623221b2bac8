-- periodic_started: record that leader term $2 enqueued periodic job $1's
-- run on start. It changes nothing (and the transaction is rolled back)
-- when this term, or a later one, already did: terms grow strictly.
UPDATE {{schema}}.periodic_jobs
SET start_term = $2, updated_at = now()
WHERE name = $1 AND (start_term IS NULL OR start_term < $2)
