-- workflow_settle (000012) planned for the arrays it gets, but not for a
-- completion batch in a small table: with a batch of a few hundred
-- parents in a workflow of 10,000 jobs, the planner found it cheaper to
-- read all of job_deps (the edges of every parent, for an OR of two
-- = ANY conditions) and to hash all of jobs (to join the children), once
-- per batch: work that grows with the workflow, not with the batch (a
-- layered run of 20 × 500 spent a third of its completion time there).
-- Turned off for the function only, its statements go through the
-- primary keys of job_deps and jobs, in proportion to the batch's edges
-- whatever the tables hold (TestWorkflowPlans/BatchCompletionUsesIndexes).
ALTER FUNCTION {{schema}}.workflow_settle(bigint[], text[])
    SET enable_seqscan = off;
ALTER FUNCTION {{schema}}.workflow_settle(bigint[], text[])
    SET enable_hashjoin = off;
ALTER FUNCTION {{schema}}.workflow_settle(bigint[], text[])
    SET enable_mergejoin = off;
