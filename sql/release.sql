-- release: hand a job back untouched (the client is stopping and cancelled
-- it): available again at its old place in line, the attempt not spent.
UPDATE {{schema}}.jobs
SET attempt = attempt - 1, state = 'available', lease_until = NULL
WHERE id = $1 AND fence = $2 AND state = 'running'
