-- Blocked jobs by queue, for QueueList's count of them: without it the
-- count would read every job of the table. Partial, as migration 8's
-- indexes are: a job enters it only while it waits for its parents (at
-- insert, or when a retry brings it back to blocked), so claims,
-- completions and releases (blocked → available: the new row version is
-- not blocked) write nothing into it, and a queue without workflows never
-- touches it.
CREATE INDEX jobs_blocked_idx ON {{schema}}.jobs (queue) WHERE state = 'blocked';
