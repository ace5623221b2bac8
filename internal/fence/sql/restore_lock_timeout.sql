-- restore_lock_timeout: put back the lock_timeout save_lock_timeout kept,
-- for the rest of the transaction.
SELECT set_config('lock_timeout', current_setting('pgqueue.saved_lock_timeout'), true)
