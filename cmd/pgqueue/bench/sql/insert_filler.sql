-- insert_filler: $1 rows of queue $2 that no claim may take, half finished,
-- half due in a day: they show whether claims slow down as the table grows.
INSERT INTO {{schema}}.jobs (queue, kind, state, run_at, finalized_at, attempt)
SELECT $2, 'bench_filler',
       CASE WHEN g % 2 = 0 THEN 'completed' ELSE 'scheduled' END,
       CASE WHEN g % 2 = 0 THEN now() ELSE now() + interval '1 day' END,
       CASE WHEN g % 2 = 0 THEN now() END,
       CASE WHEN g % 2 = 0 THEN 1 ELSE 0 END
FROM generate_series(1, $1) g
