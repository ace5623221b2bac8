-- prune_backlog_left: how many of the backlog's jobs are left.
SELECT count(*) FROM {{schema}}.jobs WHERE kind = 'bench_pruned'
