-- periodic_states: the database time, and the recorded state of each of the
-- periodic jobs named in $1 that has a row (one row with a null name when
-- none has). Read without locks: it only tells the leader which jobs to
-- look at under their lock, and how long it may sleep.
SELECT now(), p.name, p.last_instant, p.start_term
FROM (VALUES (1)) AS one (x)
LEFT JOIN {{schema}}.periodic_jobs p ON p.name = ANY ($1::text[])
