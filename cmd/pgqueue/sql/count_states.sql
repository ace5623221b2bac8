-- count_states: how many jobs are in each state, for the progress line.
SELECT state, count(*) FROM {{schema}}.jobs GROUP BY state
