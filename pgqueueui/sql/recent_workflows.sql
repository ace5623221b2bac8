-- recent_workflows: the $1 newest workflow ids that still have jobs,
-- newest first. A skip scan of jobs_workflow_idx: one descent per
-- workflow listed, however many jobs each holds.
WITH RECURSIVE w(id) AS (
    (SELECT workflow_id FROM {{schema}}.jobs
     WHERE workflow_id IS NOT NULL
     ORDER BY workflow_id DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.workflow_id FROM {{schema}}.jobs j
            WHERE j.workflow_id IS NOT NULL AND j.workflow_id < w.id
            ORDER BY j.workflow_id DESC LIMIT 1)
    FROM w
    WHERE w.id IS NOT NULL
)
SELECT id FROM w WHERE id IS NOT NULL LIMIT $1
