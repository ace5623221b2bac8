-- save_lock_timeout: keep the transaction's lock_timeout in a variable of
-- the transaction, for restore_lock_timeout, which runs in the same batch
-- (so the value never travels to the client and back).
SELECT set_config('pgqueue.saved_lock_timeout', current_setting('lock_timeout'), true)
