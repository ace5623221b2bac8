-- raw_copy: the raw ceiling's enqueue, a text COPY; the rows follow this
-- column list (see raw.go).
COPY {{schema}}.jobs (queue, kind, args, priority, max_attempts, tags, meta, singleton_key) FROM STDIN
