-- job_list: a page of jobs for JobList, every column of JobRow in the
-- order jobFullScanner reads them.
--
-- {{order}}, {{type}}, {{dir}} and {{cmp}} are filled when the client
-- loads its queries, from the fixed set in job_list.go: one statement per
-- ordering and direction, because an ORDER BY taken from a parameter could
-- not use an index. {{order}} is id, created_at, run_at or finalized_at
-- and {{type}} its type; {{dir}} ASC or DESC; {{cmp}} > or <, to match.
--
-- Every filter is optional: NULL means "no filter". The client runs this
-- statement unnamed (pgx.QueryExecModeCacheDescribe), so PostgreSQL plans
-- it for each call's actual values: the branches of absent filters fold
-- away and the planner picks the index the present ones allow (see
-- docs/performance.md, "Reading jobs"). A cached generic plan would have
-- to serve every combination and could use none.
--
-- The page continues after the cursor's row: ($12, $13) is the last row's
-- sort value and id. Ordering by id passes only $13. The order is total
-- (ties broken by id), so no row is returned twice or skipped across pages.
-- Ordering by finalized_at lists finalized jobs only.
SELECT j.id, j.queue, j.kind, j.args, j.priority, {{schema}}.job_state(j.state, j.gate_id, j.queue), j.attempt, j.max_attempts,
       j.run_at, j.fence, j.lease_until, j.worker_id, j.errors, j.tags, j.meta,
       j.created_at, j.attempted_at, j.finalized_at, j.singleton_key, j.partition_key, j.sequence_key,
       j.cancel_requested_at, j.output, j.progress
FROM {{schema}}.jobs j
WHERE ($1::bigint[] IS NULL OR j.id = ANY ($1))
  AND ($2::text[] IS NULL OR j.queue = ANY ($2))
  AND ($3::text[] IS NULL OR j.kind = ANY ($3))
  -- By the state shown (job_state): a child of an open gate is listed as
  -- available, not blocked. The second test is only ever true of blocked
  -- rows, so the first keeps the state's own index.
  AND ($4::text[] IS NULL OR (j.state = ANY ($4) AND (j.gate_id IS NULL OR j.state <> 'blocked'
                                                      OR {{schema}}.gate_closed(j.gate_id, j.queue)))
       OR ('available' = ANY ($4) AND j.state = 'blocked' AND j.gate_id IS NOT NULL
           AND NOT {{schema}}.gate_closed(j.gate_id, j.queue)))
  AND ($5::text[] IS NULL OR j.tags @> $5)
  AND ($6::timestamptz IS NULL OR j.created_at >= $6)
  AND ($7::timestamptz IS NULL OR j.created_at < $7)
  AND ($8::timestamptz IS NULL OR j.finalized_at >= $8)
  AND ($9::timestamptz IS NULL OR j.finalized_at < $9)
  AND ($10::jsonb IS NULL OR j.args @> $10)
  -- jobs_workflow_idx (workflow_id, id) holds a workflow's jobs in id order.
  AND ($14::bigint IS NULL OR j.workflow_id = $14)
  AND j.{{order}} IS NOT NULL
  AND ($12::{{type}} IS NULL OR (j.{{order}}, j.id) {{cmp}} ($12, $13::bigint))
  AND ($12::{{type}} IS NOT NULL OR $13::bigint IS NULL OR j.id {{cmp}} $13)
ORDER BY j.{{order}} {{dir}}, j.id {{dir}}
LIMIT $11
