DROP INDEX {{schema}}.jobs_blocked_idx;
