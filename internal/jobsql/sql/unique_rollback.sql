-- unique_rollback: undo insert_unique_upsert (a duplicate's lock, or the
-- statement's error); unique_release follows.
ROLLBACK TO SAVEPOINT pgqueue_unique
