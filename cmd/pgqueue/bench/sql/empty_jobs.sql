-- empty_jobs: empty the bench schema's jobs before a run.
TRUNCATE {{schema}}.jobs
