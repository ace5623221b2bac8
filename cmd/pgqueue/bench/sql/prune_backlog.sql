-- prune_backlog: $1 finished jobs of queue $2 for the pruner, 80% completed,
-- 10% cancelled and 10% discarded, their finalized_at spread evenly from
-- eight days ago to one day ago: all past the bench's one-hour retention,
-- in the order jobs finished in service.
INSERT INTO {{schema}}.jobs (queue, kind, args, state, attempt, fence, run_at, created_at, attempted_at, finalized_at)
SELECT $2, 'bench_pruned', jsonb_build_object('n', g),
       CASE g % 10 WHEN 0 THEN 'cancelled' WHEN 1 THEN 'discarded' ELSE 'completed' END,
       1, g, t, t, t, t
FROM (SELECT g, now() - interval '8 days' + (g::float8 / $1) * interval '7 days' AS t
      FROM generate_series(1, $1::bigint) g) s
