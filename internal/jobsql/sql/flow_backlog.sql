-- flow_backlog: whether queue $1 still has an available job, asked right
-- after a limited queue's claim in its transaction (so its own claims are
-- seen): a claim the limits cut short is tried again soon only while
-- there is a backlog; an idle queue's producer waits for a notification
-- or the poll instead.
-- The first job in claim order, read through jobs_fetch_idx as the claim
-- reads it: an EXISTS let the planner walk jobs_available_id_idx past
-- every other queue's backlog.
SELECT (SELECT id FROM {{schema}}.jobs
        WHERE state = 'available' AND queue = $1
        ORDER BY priority, run_at, id LIMIT 1) IS NOT NULL
