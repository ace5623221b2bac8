-- schedule: the scheduler's pass, one statement so that an idle leader
-- sends one a round. It makes up to $1 due scheduled jobs available,
-- oldest first, and sweeps the open gates
-- (migrations/000018_workflow_gates.up.sql): up to $1 children of open
-- gates in a queue with flow limits (given after the gate opened:
-- claim_flow.sql claims such a queue and reads no gate) are released as
-- an edge releases them, and open gates with no child left waiting, which
-- two claims that took the last children together left behind, are
-- deleted. The two writes touch different rows (scheduled, blocked).
-- Notifies channel $2 once for each queue that got jobs; returns each
-- queue and how many jobs it got.
WITH due AS (
    SELECT id
    FROM {{schema}}.jobs
    WHERE state = 'scheduled' AND run_at <= now()
    ORDER BY run_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE {{schema}}.jobs j
    SET state = 'available'
    WHERE j.id = ANY (ARRAY(SELECT id FROM due))
    RETURNING j.queue
), limited AS (
    SELECT g.parent_id, g.queue
    FROM {{schema}}.job_gates g
    JOIN {{schema}}.queues q ON q.name = g.queue
    WHERE g.opened_at IS NOT NULL
      AND (q.max_running IS NOT NULL OR q.max_running_per_key IS NOT NULL OR q.rate_limit IS NOT NULL)
), gated AS (
    -- Each gate's children through jobs_gated_idx, in its order.
    SELECT k.id
    FROM limited l
    CROSS JOIN LATERAL (
        SELECT c.id FROM {{schema}}.jobs c
        WHERE c.gate_id = l.parent_id AND c.queue = l.queue AND c.state = 'blocked'
        ORDER BY c.priority, c.run_at, c.id
        LIMIT $1
        FOR UPDATE SKIP LOCKED
    ) k
    LIMIT $1
), released AS (
    UPDATE {{schema}}.jobs j
    SET state = 'available', pending_parents = 0
    WHERE j.id = ANY (ARRAY(SELECT id FROM gated)) AND j.state = 'blocked'
    RETURNING j.queue
), drained AS (
    DELETE FROM {{schema}}.job_gates g
    WHERE g.opened_at IS NOT NULL
      -- A probe per open gate, never a join that could read every gated
      -- job (see claim.sql).
      AND (SELECT c.id FROM {{schema}}.jobs c
           WHERE c.gate_id = g.parent_id AND c.queue = g.queue AND c.state = 'blocked'
           ORDER BY c.priority, c.run_at, c.id LIMIT 1) IS NULL
)
SELECT queue, count(*), pg_notify($2, queue)::text
FROM (SELECT queue FROM moved UNION ALL SELECT queue FROM released) m
GROUP BY queue
