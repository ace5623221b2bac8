-- queue_held: why queue $1's available jobs wait, for operators: how many
-- are the later jobs of a sequence whose job runs or holds it, how many
-- have a key at its running limit, a key that used its rate, and, of the
-- rest, how many wait because the queue is at max_running or used its
-- rate. Reads every available job of the queue (jobs_fetch_idx) and its
-- running jobs: a look, not something to run on every claim.
WITH jobs_first AS (
    -- Reads nothing: it makes jobs the first table the statement locks,
    -- before queues, as migrations take them (the other order deadlocked
    -- with a migration; see poll.sql). The planner drops it.
    SELECT FROM {{schema}}.jobs WHERE false
), q AS (
    SELECT l.max_running, l.max_running_per_key, l.rate_limit,
           l.rate_period_us * interval '1 microsecond' AS rate_period,
           coalesce(l.rate_per_key, false) AS rate_per_key,
           coalesce(l.partition_by_kind, false) AS by_kind,
           coalesce(l.partition_by_args, '{}') AS by_args,
           coalesce(l.sequence_continue, false) AS sequence_continue
    FROM (SELECT 1) AS one LEFT JOIN {{schema}}.queues l ON l.name = $1
), running AS (
    SELECT {{schema}}.flow_key(j.partition_key, j.kind, j.args, q.by_kind, q.by_args) AS key
    FROM {{schema}}.jobs j, q WHERE j.state = 'running' AND j.queue = $1
), busy_keys AS (
    SELECT key FROM running, q WHERE key IS NOT NULL
    GROUP BY key, q.max_running_per_key HAVING count(*) >= q.max_running_per_key
), rates AS (
    SELECT r.key, count(*) AS n
    FROM {{schema}}.flow_rates r, unnest(r.starts) AS s(at), q
    WHERE r.queue = $1 AND s.at > now() - q.rate_period
    GROUP BY r.key
), waiting AS (
    SELECT {{schema}}.flow_key(j.partition_key, j.kind, j.args, q.by_kind, q.by_args) AS key,
           j.sequence_key IS NOT NULL AND EXISTS (
               SELECT 1 FROM {{schema}}.jobs e
               WHERE e.queue = $1 AND e.sequence_key = j.sequence_key AND e.state <> 'completed' AND e.id <> j.id
                 AND (e.state = 'running'
                      OR (e.id < j.id AND (e.state IN ('scheduled', 'available') OR NOT q.sequence_continue)))
           ) AS in_sequence
    FROM {{schema}}.jobs j, q
    WHERE j.state = 'available' AND j.queue = $1
), classified AS (
    SELECT w.in_sequence,
           NOT w.in_sequence AND w.key IN (SELECT key FROM busy_keys) AS by_key_limit,
           NOT w.in_sequence AND q.rate_per_key AND q.rate_limit IS NOT NULL
               AND coalesce((SELECT n FROM rates WHERE rates.key = w.key), 0) >= q.rate_limit AS by_key_rate
    FROM waiting w, q
)
SELECT count(*) FILTER (WHERE in_sequence),
       count(*) FILTER (WHERE by_key_limit),
       count(*) FILTER (WHERE by_key_rate AND NOT by_key_limit),
       count(*) FILTER (WHERE NOT in_sequence AND NOT by_key_limit AND NOT by_key_rate),
       (SELECT count(*) FROM running),
       (SELECT count(*) FROM busy_keys),
       coalesce((SELECT n FROM rates WHERE key = ''), 0),
       (SELECT max_running FROM q) IS NOT NULL AND (SELECT count(*) FROM running) >= (SELECT max_running FROM q),
       (SELECT rate_limit FROM q) IS NOT NULL AND NOT (SELECT rate_per_key FROM q)
           AND coalesce((SELECT n FROM rates WHERE key = ''), 0) >= (SELECT rate_limit FROM q)
FROM classified
