-- Vacuum truncates the jobs table's empty tail again (the default).
ALTER TABLE {{schema}}.jobs RESET (vacuum_truncate);
