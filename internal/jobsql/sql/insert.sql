-- insert: one job. A run_at in the future makes it scheduled; otherwise it is
-- available at once.
INSERT INTO {{schema}}.jobs (queue, kind, args, priority, max_attempts, run_at, state, tags, meta, singleton_key,
                             partition_key, sequence_key)
VALUES ($1, $2, $3, $4, $5, coalesce($6, now()),
        CASE WHEN $6 > now() THEN 'scheduled' ELSE 'available' END,
        $7, $8, $9, $10, $11)
RETURNING id, queue, kind, args, priority, state, attempt, max_attempts,
          run_at, fence, lease_until, worker_id, errors, tags, meta,
          created_at, attempted_at, finalized_at, singleton_key,
          partition_key, sequence_key
