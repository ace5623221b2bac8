-- poll: the queues among $1 that have a job available, and a row with a
-- null queue when lease $2 (the maintenance leader's) is free. One cheap
-- query per poll interval for all of a client's queues: the fallback for a
-- missed notification, and the follower's cue to campaign. A paused queue
-- is left out: its producer would find nothing to claim. Each queue comes
-- with whether it has flow limits (its producer then claims with
-- claim_flow.sql) and, when it has a rate limit, the time one start takes
-- of it in microseconds (rate_period / rate_limit), how soon a claim held
-- back by the rate may try again, whether a limit is queue-wide
-- (max_running, or a rate of the whole queue: its slots are shared by every
-- client's claims), and whether it has an available job of a sequence
-- (jobs_sequence_idx; only under the claim lock can it be claimed).
--
-- The children of an open gate (migrations/000018_workflow_gates.up.sql)
-- are available in all but their row, which stays blocked until a claim
-- takes them: a queue with one counts as having work. Otherwise a client
-- that missed the gate's notification, or whose claim of the children
-- rolled back (a killed connection notifies no one), would never claim
-- them while no other job of the queue is available. As in claim.sql's
-- gate: the queue's open gates in job_gates_open_idx, each probed in
-- jobs_gated_idx, up to the first with a child. A UNION, not an OR: the
-- EXISTS of available jobs stays a semi-join probing jobs_fetch_idx, where
-- under an OR the planner may hash it, reading every available job. The
-- gates' probe is a subquery with a LIMIT, which no plan turns into a
-- join (as an EXISTS it became a hash join over all of job_gates).
--
-- jobs is read first, in the first item of FROM, and queues after it:
-- PostgreSQL locks a statement's tables in that order (when it parses the
-- statement and at each execution of it prepared), and a migration takes
-- jobs, then queues. Holding queues while waiting for jobs deadlocked with
-- one.
SELECT a.q, l.name IS NOT NULL, coalesce(l.rate_period_us / l.rate_limit, 0),
       coalesce(l.max_running IS NOT NULL OR (l.rate_limit IS NOT NULL AND NOT coalesce(l.rate_per_key, false)), false),
       EXISTS (SELECT 1 FROM {{schema}}.jobs s
               WHERE s.queue = a.q AND s.sequence_key IS NOT NULL AND s.state = 'available')
FROM (SELECT q FROM unnest($1::text[]) AS q
      WHERE EXISTS (SELECT 1 FROM {{schema}}.jobs j WHERE j.state = 'available' AND j.queue = q)
      UNION
      SELECT q FROM unnest($1::text[]) AS q
      WHERE (SELECT g.parent_id FROM {{schema}}.job_gates g
             WHERE g.queue = q AND g.opened_at IS NOT NULL
               AND (SELECT c.id FROM {{schema}}.jobs c
                    WHERE c.gate_id = g.parent_id AND c.queue = q AND c.state = 'blocked'
                    ORDER BY c.priority, c.run_at, c.id LIMIT 1) IS NOT NULL
             ORDER BY g.opened_at, g.parent_id LIMIT 1) IS NOT NULL) AS a
LEFT JOIN {{schema}}.queues l ON l.name = a.q
     AND (l.max_running IS NOT NULL OR l.max_running_per_key IS NOT NULL OR l.rate_limit IS NOT NULL)
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.queues p WHERE p.name = a.q AND p.paused_at IS NOT NULL)
UNION ALL
SELECT NULL, false, 0, false, false
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.leases l WHERE l.name = $2 AND l.expires_at > now())
