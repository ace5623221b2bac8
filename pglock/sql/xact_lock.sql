-- xact_lock: wait for the transaction-scoped advisory lock ($1, $2), then
-- take a fence token for this acquisition. The lock is in FROM so that it is
-- taken before the fence is drawn.
SELECT nextval('{{schema}}.fence_seq')
FROM pg_advisory_xact_lock($1::int4, $2::int4)
