-- set_idle_timeout: end this transaction's session if it sits idle for
-- more than $1 milliseconds (a SingletonXact holder paused past its job
-- lease), which drops its lock and its uncommitted work. Local to the
-- transaction.
SELECT set_config('idle_in_transaction_session_timeout', $1, true)
