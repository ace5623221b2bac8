-- poll: the queues among $1 that have a job available, and a row with a
-- null queue when lease $2 (the maintenance leader's) is free. One cheap
-- query per poll interval for all of a client's queues: the fallback for a
-- missed notification, and the follower's cue to campaign. A paused queue
-- is left out: its producer would find nothing to claim.
SELECT q
FROM unnest($1::text[]) AS q
WHERE EXISTS (SELECT 1 FROM {{schema}}.jobs j WHERE j.state = 'available' AND j.queue = q)
  AND NOT EXISTS (SELECT 1 FROM {{schema}}.queues p WHERE p.name = q AND p.paused_at IS NOT NULL)
UNION ALL
SELECT NULL
WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.leases l WHERE l.name = $2 AND l.expires_at > now())
