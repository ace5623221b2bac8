-- empty_jobs: delete every job left over from an earlier demo.
TRUNCATE {{schema}}.jobs
