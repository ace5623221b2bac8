-- workflow_settle planned as 000012 made it.
ALTER FUNCTION {{schema}}.workflow_settle(bigint[], text[]) RESET enable_seqscan;
ALTER FUNCTION {{schema}}.workflow_settle(bigint[], text[]) RESET enable_hashjoin;
ALTER FUNCTION {{schema}}.workflow_settle(bigint[], text[]) RESET enable_mergejoin;
