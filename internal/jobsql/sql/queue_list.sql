-- queue_list: every queue that has a blocked, scheduled, available or
-- running job or a row in queues, with its pause, its flow limits and the
-- count of its jobs in those four states, exact at the statement's
-- snapshot. Each count reads only its state's partial index
-- (jobs_blocked_idx, jobs_fetch_idx, jobs_scheduled_idx, jobs_running_idx,
-- and job_gates with jobs_gated_idx) and the rows it names, so the cost grows with the backlog, never with
-- the finished jobs. The oldest available job's run_at
-- comes from the same pass, with its age by the database clock.
WITH blocked AS (
    SELECT queue, count(*) AS n
    FROM {{schema}}.jobs WHERE state = 'blocked' AND gate_id IS NULL GROUP BY queue
), available AS (
    SELECT queue, count(*) AS n, min(run_at) AS oldest
    FROM {{schema}}.jobs WHERE state = 'available' GROUP BY queue
), gated AS (
    -- Children behind a gate (migrations/000018_workflow_gates.up.sql),
    -- through job_gates and jobs_gated_idx: blocked behind a closed gate;
    -- behind an open one blocked in their rows but claimable, so counted
    -- as available.
    SELECT g.queue, count(*) FILTER (WHERE g.opened_at IS NULL) AS closed,
           count(*) FILTER (WHERE g.opened_at IS NOT NULL) AS open,
           min(c.run_at) FILTER (WHERE g.opened_at IS NOT NULL) AS oldest
    FROM {{schema}}.job_gates g
    JOIN {{schema}}.jobs c ON c.gate_id = g.parent_id AND c.queue = g.queue AND c.state = 'blocked'
    GROUP BY g.queue
), scheduled AS (
    SELECT queue, count(*) AS n
    FROM {{schema}}.jobs WHERE state = 'scheduled' GROUP BY queue
), running AS (
    SELECT queue, count(*) AS n
    FROM {{schema}}.jobs WHERE state = 'running' GROUP BY queue
), names AS (
    SELECT queue AS name FROM available
    UNION SELECT queue FROM blocked
    UNION SELECT queue FROM gated
    UNION SELECT queue FROM scheduled
    UNION SELECT queue FROM running
    UNION SELECT name FROM {{schema}}.queues
), limits AS (
    -- queues is read only in these CTEs, after jobs, never in the outer
    -- FROM: PostgreSQL locks the outer FROM's tables first at each
    -- execution of the prepared statement, and holding queues while
    -- waiting for jobs deadlocked with a migration (see poll.sql).
    SELECT * FROM {{schema}}.queues
)
SELECT n.name, q.paused_at, q.updated_at,
       coalesce(s.n, 0), coalesce(a.n, 0) + coalesce(u.open, 0), coalesce(r.n, 0),
       least(a.oldest, u.oldest), (extract(epoch FROM now() - least(a.oldest, u.oldest)) * 1000000)::bigint,
       q.max_running, q.max_running_per_key, q.rate_limit, q.rate_period_us,
       coalesce(q.rate_per_key, false), coalesce(q.partition_by_kind, false),
       coalesce(q.partition_by_args, '{}'), coalesce(q.sequence_continue, false),
       coalesce(b.n, 0) + coalesce(u.closed, 0)
FROM names n
LEFT JOIN limits q ON q.name = n.name
LEFT JOIN blocked b ON b.queue = n.name
LEFT JOIN gated u ON u.queue = n.name
LEFT JOIN scheduled s ON s.queue = n.name
LEFT JOIN available a ON a.queue = n.name
LEFT JOIN running r ON r.queue = n.name
ORDER BY n.name
