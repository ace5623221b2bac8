-- sequence_next as 000010 made it: a blocked job counts as failed.
CREATE OR REPLACE FUNCTION {{schema}}.sequence_next(queue text, sequence_key text, id bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT current_setting('pgqueue.claim_locked', true) = queue
       AND NOT EXISTS (
           SELECT 1 FROM {{schema}}.jobs e
           WHERE e.queue = sequence_next.queue AND e.sequence_key = sequence_next.sequence_key
             AND e.state <> 'completed' AND e.id <> sequence_next.id
             AND (e.state = 'running'
                  OR (e.id < sequence_next.id
                      AND (e.state IN ('scheduled', 'available')
                           OR NOT coalesce((SELECT q.sequence_continue FROM {{schema}}.queues q
                                            WHERE q.name = sequence_next.queue), false)))))
$$;
