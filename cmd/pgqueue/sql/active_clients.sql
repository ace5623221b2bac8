-- active_clients: the processes working the schema right now, as migrate
-- down sees them, one row per client ID: whether it is the maintenance
-- leader (every started client takes part in the election, so one holds
-- this lease while any runs) and how many running jobs it holds with a
-- valid job lease. A process's leader and worker are one client, one ID:
-- one row. Both by the database clock; a killed client drops out once its
-- leases expire.
SELECT id, bool_or(leader) AS leader, count(*) FILTER (WHERE NOT leader) AS jobs
FROM (
    SELECT holder AS id, true AS leader
    FROM {{schema}}.leases
    WHERE name = 'pgqueue:maintenance' AND expires_at > now()
    UNION ALL
    SELECT worker_id, false
    FROM {{schema}}.jobs
    WHERE state = 'running' AND lease_until > now() AND worker_id IS NOT NULL
) AS c
GROUP BY id
ORDER BY id
