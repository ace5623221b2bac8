-- workflow_reserve: reserve $1 job ids for a batch with dependencies, and
-- its workflow: $2 when the batch joins an existing workflow (whose inserts
-- are then serialised by a transaction lock, so its size limit holds
-- under concurrency), else a new one. Returns the ids, the workflow's id
-- and how many jobs it holds already.
SELECT ARRAY(SELECT nextval(pg_get_serial_sequence('{{schema}}.jobs', 'id')) FROM generate_series(1, $1::int)),
       coalesce($2::bigint, nextval('{{schema}}.workflow_seq')),
       CASE WHEN $2::bigint IS NULL THEN 0
            ELSE (SELECT count(*)
                  FROM (SELECT pg_advisory_xact_lock(hashtext('pgqueue:workflow:{{schema}}'), ($2::bigint % 2147483647)::int)) AS l,
                       {{schema}}.jobs j
                  WHERE j.workflow_id = $2::bigint)
       END
