-- set_lock_timeout: bound the next statements' lock waits by $1 (a
-- lock_timeout value such as '5000ms'), until the transaction ends or
-- restore_lock_timeout runs.
SELECT set_config('lock_timeout', $1, true)
