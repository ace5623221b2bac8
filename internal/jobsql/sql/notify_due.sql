-- notify_due: wake the listeners of channel $1 once for each queue in $2
-- that has a job due now: $3 holds the jobs' run_at (null: now), in step
-- with $2.
SELECT pg_notify($1, q)
FROM (SELECT DISTINCT q
      FROM unnest($2::text[], $3::timestamptz[]) AS r(q, run_at)
      WHERE r.run_at IS NULL OR r.run_at <= now()) due
