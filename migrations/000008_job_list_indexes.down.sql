DROP INDEX {{schema}}.jobs_available_id_idx;
DROP INDEX {{schema}}.jobs_failed_idx;
