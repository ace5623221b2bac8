-- unique_release: end the savepoint of unique_savepoint, keeping what it
-- holds.
RELEASE SAVEPOINT pgqueue_unique
