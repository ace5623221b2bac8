-- prune_pending: whether any finished job past the bench's one-hour
-- retention is left. It reads jobs_finalized_idx from its start, as the
-- pruner's first batch of a run does.
SELECT EXISTS (SELECT 1 FROM {{schema}}.jobs WHERE finalized_at IS NOT NULL AND finalized_at < now() - interval '1 hour')
