-- table_sizes: the bytes of the jobs table's heap and of all its indexes.
SELECT pg_relation_size('{{schema}}.jobs'), pg_indexes_size('{{schema}}.jobs')
