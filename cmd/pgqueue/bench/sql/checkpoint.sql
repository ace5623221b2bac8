-- checkpoint: start a timed run from a fresh checkpoint. Needs superuser or
-- pg_checkpoint.
CHECKPOINT
