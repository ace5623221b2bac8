-- unique_savepoint: the savepoint insert_unique_upsert runs in, inside
-- the caller's transaction, so that a duplicate's lock can be let go and an
-- error leaves the transaction usable.
SAVEPOINT pgqueue_unique
