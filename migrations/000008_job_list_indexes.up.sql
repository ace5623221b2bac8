-- Indexes for JobList (see docs/performance.md, "Reading jobs"). Updates
-- of jobs rows are never HOT (state, in every partial index's predicate,
-- changes on each transition), so a full index would add an index write to
-- every insert, claim and completion. These are partial: a row enters one
-- only in the state it covers, so the claim path pays nothing for them and
-- an insert pays one small append at the right edge of a btree.

-- The failed jobs, newest first: discarded and cancelled rows are a few
-- percent of a table of completed ones, too sparse to find by walking the
-- primary key.
CREATE INDEX jobs_failed_idx ON {{schema}}.jobs (id) WHERE state IN ('discarded', 'cancelled');

-- The backlog in insertion order: available rows are the newest, so
-- walking the primary key from the oldest id passes every finished row
-- first. jobs_fetch_idx orders them by queue and priority, not by id.
CREATE INDEX jobs_available_id_idx ON {{schema}}.jobs (id) WHERE state = 'available';
