-- foreign_jobs: whether the jobs table holds any job of another kind than
-- $1, the demo's: such jobs are not the demo's to delete.
SELECT EXISTS (SELECT FROM {{schema}}.jobs WHERE kind <> $1)
