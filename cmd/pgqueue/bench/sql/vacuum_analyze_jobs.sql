-- vacuum_analyze_jobs: set hint bits and refresh the planner's statistics of
-- the jobs table before a timed run.
VACUUM ANALYZE {{schema}}.jobs
