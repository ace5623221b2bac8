-- empty_jobs: empty the bench schema's jobs before a run, with their
-- dependency edges and gates, and its queues' limits and rate windows,
-- which an earlier limit run left.
TRUNCATE {{schema}}.jobs, {{schema}}.job_deps, {{schema}}.job_gates, {{schema}}.flow_rates, {{schema}}.queues
