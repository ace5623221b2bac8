-- vacuum_jobs: reclaim the dead rows of the jobs table (the pruner's
-- deletes) for new rows, and give back empty pages at the heap's end:
-- TRUNCATE, since migration 15 turns truncation off for the table's
-- vacuums (vacuum_truncate = false).
VACUUM (TRUNCATE) {{schema}}.jobs
