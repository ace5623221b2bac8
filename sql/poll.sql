-- poll: the queues among $1 that have a job available. One cheap query per
-- poll interval for all of a client's queues: the fallback for a missed
-- notification.
SELECT q
FROM unnest($1::text[]) AS q
WHERE EXISTS (SELECT 1 FROM {{schema}}.jobs j WHERE j.state = 'available' AND j.queue = q)
