-- Lease locks: a row per lock name. Acquire, renew and release are each one
-- conditional statement (sql/lease_*.sql); every acquisition takes a new
-- fence from fence_seq, so a takeover always holds a higher token.
CREATE TABLE {{schema}}.leases (
    name        text        PRIMARY KEY,
    holder      text        NOT NULL,
    fence       bigint      NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

-- Singleton jobs: at most one job per key runs at a time.
ALTER TABLE {{schema}}.jobs ADD COLUMN singleton_key text;
