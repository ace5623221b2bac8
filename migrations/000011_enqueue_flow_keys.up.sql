-- enqueue() of migration 6 with the flow keys of migration 10:
-- partition_key and sequence_key, as EnqueueOpts.PartitionKey and
-- SequenceKey (NULL for none; 1 to 255 bytes, else PQE04). A function's
-- parameters cannot change in place (CREATE OR REPLACE would add an
-- overload, and calls that fit both would be ambiguous), so it is dropped
-- and created again, in this migration's transaction. The new parameters
-- come last: calls by position keep their meaning.
DROP FUNCTION {{schema}}.enqueue(text, jsonb, text, smallint, timestamptz, int, text[], jsonb, text, interval, text[]);

-- enqueue() inserts a job from SQL: from a trigger, in the same transaction
-- as a row change, or from a service written in another language. It
-- validates as the Go API does, raising errors with SQLSTATEs of their own
-- (PQE01 kind, PQE02 queue, PQE03 args, PQE04 option), honours uniqueness
-- (unique_key, unique_period, unique_states, as UniqueOpts.ByKey, ByPeriod
-- and ByState), stores the flow keys (partition_key, sequence_key) and
-- notifies waiting workers at commit like a Go enqueue. It returns the
-- job's id, and whether it is an existing equal job that made this one a
-- duplicate (then nothing was inserted).
CREATE FUNCTION {{schema}}.enqueue(
    kind          text,
    args          jsonb       DEFAULT '{}',
    queue         text        DEFAULT 'default',
    priority      smallint    DEFAULT 0,
    run_at        timestamptz DEFAULT NULL,
    max_attempts  int         DEFAULT 25,
    tags          text[]      DEFAULT '{}',
    meta          jsonb       DEFAULT '{}',
    unique_key    text        DEFAULT NULL,
    unique_period interval    DEFAULT NULL,
    unique_states text[]      DEFAULT NULL,
    partition_key text        DEFAULT NULL,
    sequence_key  text        DEFAULT NULL
) RETURNS TABLE (job_id bigint, duplicate boolean)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    states   text[];
    base     bytea;
    key      bytea;
    due      timestamptz := coalesce(enqueue.run_at, now());
    period   bigint;
    v        text := 'pgqueue-unique-1';
BEGIN
    IF enqueue.kind IS NULL OR enqueue.kind = '' OR octet_length(enqueue.kind) > 255 THEN
        RAISE EXCEPTION 'pgqueue: invalid job kind %', coalesce(quote_literal(enqueue.kind), 'NULL')
            USING ERRCODE = 'PQE01', HINT = 'A kind is 1 to 255 bytes.';
    END IF;
    IF enqueue.queue IS NULL OR enqueue.queue !~ '^[a-z0-9][a-z0-9_.-]{0,62}$' THEN
        RAISE EXCEPTION 'pgqueue: invalid queue name %', coalesce(quote_literal(enqueue.queue), 'NULL')
            USING ERRCODE = 'PQE02',
                  HINT = 'A queue name is 1 to 63 bytes of a-z, 0-9, _, - and ., starting with a letter or digit.';
    END IF;
    IF enqueue.args IS NULL OR octet_length(enqueue.args::text) > 1048576 THEN
        RAISE EXCEPTION 'pgqueue: invalid job args for %: %', enqueue.kind,
            CASE WHEN enqueue.args IS NULL THEN 'NULL' ELSE 'larger than 1 MiB' END
            USING ERRCODE = 'PQE03';
    END IF;
    IF enqueue.max_attempts IS NULL OR enqueue.max_attempts < 1 THEN
        RAISE EXCEPTION 'pgqueue: invalid option for %: max_attempts must be at least 1, got %', enqueue.kind, enqueue.max_attempts
            USING ERRCODE = 'PQE04';
    END IF;
    IF enqueue.priority IS NULL OR enqueue.tags IS NULL OR array_position(enqueue.tags, NULL) IS NOT NULL OR enqueue.meta IS NULL THEN
        RAISE EXCEPTION 'pgqueue: invalid option for %: priority, tags (and their elements) and meta must not be NULL', enqueue.kind
            USING ERRCODE = 'PQE04';
    END IF;
    -- Bytes, as the Go client counts them; the columns' CHECK would take
    -- 255 characters, and would refuse '' with a SQLSTATE of its own.
    IF octet_length(enqueue.partition_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'pgqueue: invalid option for %: partition_key must be NULL or 1 to 255 bytes, got % bytes', enqueue.kind, octet_length(enqueue.partition_key)
            USING ERRCODE = 'PQE04';
    END IF;
    IF octet_length(enqueue.sequence_key) NOT BETWEEN 1 AND 255 THEN
        RAISE EXCEPTION 'pgqueue: invalid option for %: sequence_key must be NULL or 1 to 255 bytes, got % bytes', enqueue.kind, octet_length(enqueue.sequence_key)
            USING ERRCODE = 'PQE04';
    END IF;

    IF enqueue.unique_key IS NOT NULL THEN
        states := coalesce(enqueue.unique_states, ARRAY['available', 'completed', 'running', 'scheduled']);
        IF NOT states <@ ARRAY['scheduled', 'available', 'running', 'completed', 'cancelled', 'discarded']
           OR NOT ARRAY['scheduled', 'available', 'running'] <@ states THEN
            RAISE EXCEPTION 'pgqueue: invalid option for %: unique_states % must hold scheduled, available and running, and only job states', enqueue.kind, states
                USING ERRCODE = 'PQE04';
        END IF;
        period := coalesce((extract(epoch FROM enqueue.unique_period) * 1000000)::bigint, 0);
        IF period < 0 OR (enqueue.unique_period IS NOT NULL AND period = 0) THEN
            RAISE EXCEPTION 'pgqueue: invalid option for %: unique_period % out of range', enqueue.kind, enqueue.unique_period
                USING ERRCODE = 'PQE04';
        END IF;
        -- The same bytes the Go client hashes for UniqueOpts{ByKey}: each
        -- part named and length-prefixed.
        base := sha256(
            convert_to('version:' || octet_length(v) || ':', 'UTF8') || convert_to(v, 'UTF8') ||
            convert_to('kind:' || octet_length(enqueue.kind) || ':', 'UTF8') || convert_to(enqueue.kind, 'UTF8') ||
            convert_to('key:' || octet_length(enqueue.unique_key) || ':', 'UTF8') || convert_to(enqueue.unique_key, 'UTF8'));
        key := {{schema}}.unique_key(base, period, due);
    END IF;

    LOOP
        INSERT INTO {{schema}}.jobs AS j (queue, kind, args, priority, max_attempts, run_at, state, tags, meta,
                                          partition_key, sequence_key, unique_key, unique_states)
        VALUES (enqueue.queue, enqueue.kind, enqueue.args, enqueue.priority, enqueue.max_attempts, due,
                CASE WHEN due > now() THEN 'scheduled' ELSE 'available' END,
                enqueue.tags, enqueue.meta, enqueue.partition_key, enqueue.sequence_key,
                key, CASE WHEN key IS NOT NULL THEN states END)
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
        RETURNING j.id INTO job_id;
        IF job_id IS NOT NULL THEN
            duplicate := false;
            IF due <= now() THEN
                PERFORM pg_notify('{{channel}}', enqueue.queue);
            END IF;
            RETURN NEXT;
            RETURN;
        END IF;
        -- A duplicate: return the job that holds the key. In a function
        -- each statement sees what committed before it started, so a job
        -- committed after the insert's snapshot is found here.
        SELECT j.id INTO job_id FROM {{schema}}.jobs j
        WHERE j.unique_key = key AND j.state = ANY (j.unique_states);
        IF job_id IS NOT NULL THEN
            duplicate := true;
            RETURN NEXT;
            RETURN;
        END IF;
        -- It left its states in between: try again.
    END LOOP;
END
$$;
