-- vacuum_jobs: reclaim the dead rows of the jobs table (the pruner's
-- deletes) for new rows, and give back empty pages at the heap's end.
VACUUM {{schema}}.jobs
