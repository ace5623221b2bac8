DROP TABLE IF EXISTS {{schema}}.periodic_jobs;
