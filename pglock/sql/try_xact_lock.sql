-- try_xact_lock: take the transaction-scoped advisory lock ($1, $2) if free;
-- the fence is taken only when it was.
SELECT got, CASE WHEN got THEN nextval('{{schema}}.fence_seq') END
FROM pg_try_advisory_xact_lock($1::int4, $2::int4) AS got
