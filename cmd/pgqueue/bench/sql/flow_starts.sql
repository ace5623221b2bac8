-- flow_starts: the start instants (attempted_at: a limited claim's
-- clock_timestamp, read under the queue's claim lock) of the jobs of queue
-- $1 that started, in time order: the rate a run kept, by the database.
SELECT attempted_at FROM {{schema}}.jobs
WHERE queue = $1 AND attempted_at IS NOT NULL
ORDER BY attempted_at
