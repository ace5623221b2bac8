-- active_clients: the clients working the schema right now, as migrate
-- down sees them: the maintenance leader (every started client takes part
-- in the election, so one holds this lease while any runs) and the workers
-- of running jobs whose job lease is still valid. Both by the database
-- clock; a killed client drops out once its lease expires.
SELECT 'leader' AS what, holder
FROM {{schema}}.leases
WHERE name = 'pgqueue:maintenance' AND expires_at > now()
UNION
SELECT DISTINCT 'worker', worker_id
FROM {{schema}}.jobs
WHERE state = 'running' AND lease_until > now() AND worker_id IS NOT NULL
ORDER BY 1, 2
