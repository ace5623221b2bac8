-- count_left: how many jobs an earlier demo run left, deleted next.
SELECT count(*) FROM {{schema}}.jobs
