-- sequence_next, as in 000010, with blocked jobs among those that wait to
-- run: a job waiting for its parents holds the later jobs of its sequence
-- whatever the queue's sequence_continue, as a scheduled or available one
-- does. Before, it held them only because a blocked job is not 'scheduled'
-- or 'available' and so counted as failed: under sequence_continue the
-- later jobs passed it. (Enqueue refuses a job that depends on a later job
-- of its own sequence, which could then never start.)
CREATE OR REPLACE FUNCTION {{schema}}.sequence_next(queue text, sequence_key text, id bigint)
RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT current_setting('pgqueue.claim_locked', true) = queue
       AND NOT EXISTS (
           SELECT 1 FROM {{schema}}.jobs e
           WHERE e.queue = sequence_next.queue AND e.sequence_key = sequence_next.sequence_key
             AND e.state <> 'completed' AND e.id <> sequence_next.id
             AND (e.state = 'running'
                  OR (e.id < sequence_next.id
                      AND (e.state IN ('scheduled', 'available', 'blocked')
                           OR NOT coalesce((SELECT q.sequence_continue FROM {{schema}}.queues q
                                            WHERE q.name = sequence_next.queue), false)))))
$$;
