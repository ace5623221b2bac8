-- prune: delete up to $5 finished jobs whose state's retention has passed,
-- in finalized_at order from $1 on, and return how many it deleted and the
-- finalized_at of the last. $2, $3 and $4 are the retentions of completed,
-- cancelled and discarded jobs in microseconds; NULL keeps that state
-- forever (the comparison is then never true). The shortest retention
-- (least() ignores NULLs) bounds the scan of jobs_finalized_idx; each
-- row's own state decides whether it goes. Scheduled, available and
-- running rows have no finalized_at and are outside the index. Rows
-- another transaction has locked are skipped, never waited for; the next
-- run takes them.
--
-- The rows are deleted by ctid (a TID scan), not by id: with a
-- primary-key lookup per row, draining 2,000,000 rows took 14.0 s instead
-- of 11.9 s (three runs each, docs/performance.md). The ctid of a row this
-- statement has locked cannot change or be reused before it ends; should a
-- concurrent update have moved a row after all, the TID no longer matches
-- its new version and the row is simply left for the next run.
WITH doomed AS (
    SELECT ctid
    FROM {{schema}}.jobs
    WHERE finalized_at IS NOT NULL
      AND finalized_at >= $1
      AND finalized_at < now() - least($2::bigint, $3::bigint, $4::bigint) * interval '1 microsecond'
      AND CASE state
              WHEN 'completed' THEN finalized_at < now() - $2::bigint * interval '1 microsecond'
              WHEN 'cancelled' THEN finalized_at < now() - $3::bigint * interval '1 microsecond'
              WHEN 'discarded' THEN finalized_at < now() - $4::bigint * interval '1 microsecond'
          END
      -- A job that jobs still waiting depend on stays while they wait: a
      -- retry of it may yet release them. Only such jobs (has_children)
      -- read job_deps, or jobs_gated_idx for the children behind its gate.
      AND (has_children IS NOT TRUE OR NOT EXISTS (
          SELECT 1 FROM {{schema}}.job_deps d JOIN {{schema}}.jobs c ON c.id = d.child_id
          WHERE d.parent_id = jobs.id AND c.finalized_at IS NULL))
      AND (has_children IS NOT TRUE
           OR NOT EXISTS (SELECT 1 FROM {{schema}}.jobs c WHERE c.gate_id = jobs.id AND c.state = 'blocked'))
    ORDER BY finalized_at
    LIMIT $5
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM {{schema}}.jobs j
    WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM doomed)) AND j.finalized_at IS NOT NULL
    RETURNING j.id, j.finalized_at, j.has_children, j.workflow_id
), forgotten AS (
    -- Dependency edges go with their jobs (workflow_forget); jobs outside
    -- workflows never call it.
    SELECT {{schema}}.workflow_forget(array_agg(id)) FROM deleted
    WHERE has_children OR workflow_id IS NOT NULL HAVING count(*) > 0
)
SELECT count(*), max(finalized_at) FROM deleted WHERE (SELECT count(*) FROM forgotten) >= 0
