-- complete_one: complete_many.sql for a batch of one completion, job $1
-- under fence $2: the function complete_one (migrations/000020) writes it
-- with the same fencing and returns the same rows. Its parameters are
-- scalars, so this statement is prepared once per connection, and the
-- function keeps its update's plan: complete_many.sql's arrays are
-- planned at every call, which for one job was most of its cost.
SELECT id, settled FROM {{schema}}.complete_one($1, $2)
