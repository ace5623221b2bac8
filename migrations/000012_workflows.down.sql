-- jobs first, as every client statement takes it before job_deps.
LOCK TABLE {{schema}}.jobs IN ACCESS EXCLUSIVE MODE;

DROP FUNCTION {{schema}}.workflow_forget(bigint[]);
DROP FUNCTION {{schema}}.workflow_resume(bigint[]);
DROP FUNCTION {{schema}}.workflow_settle(bigint[], text[]);
DROP TABLE {{schema}}.job_deps;
DROP SEQUENCE {{schema}}.workflow_seq;
DROP INDEX {{schema}}.jobs_workflow_idx;

-- Blocked jobs cannot be kept under the old states: they become
-- cancelled, as a job whose parents can no longer release it.
UPDATE {{schema}}.jobs SET state = 'cancelled', finalized_at = now() WHERE state = 'blocked';
ALTER TABLE {{schema}}.jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE {{schema}}.jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('scheduled', 'available', 'running', 'completed', 'discarded', 'cancelled'));

ALTER TABLE {{schema}}.jobs
    DROP COLUMN deps_cancelled,
    DROP COLUMN has_children,
    DROP COLUMN pending_parents,
    DROP COLUMN workflow_id;
