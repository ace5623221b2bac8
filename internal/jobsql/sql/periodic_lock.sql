-- periodic_lock: lock periodic job $1's row until the transaction ends and
-- read its state with the database time. SKIP LOCKED: a row another leader
-- holds (one paused in its transaction) is left for later rather than
-- waited on; that returns no row, as a new job does (periodic_create tells
-- them apart).
SELECT last_instant, start_term, now()
FROM {{schema}}.periodic_jobs
WHERE name = $1
FOR UPDATE SKIP LOCKED
