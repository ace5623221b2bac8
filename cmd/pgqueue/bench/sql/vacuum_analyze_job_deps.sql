-- vacuum_analyze_job_deps: set hint bits and refresh the planner's
-- statistics of the dependency edges and gates a workflow run just inserted, as
-- autovacuum would have in service, before the run is timed: without it
-- the first release of each edge also sets its hint bits, and plans are
-- made for an empty table.
VACUUM ANALYZE {{schema}}.job_deps, {{schema}}.job_gates
