-- notify_queues: wake the listeners of channel $1 once for each queue in $2.
SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q
