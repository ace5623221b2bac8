-- One summary per scheduled instant; a run repeated for the same instant
-- changes nothing.
INSERT INTO shop.summaries (at, payments, total_cents)
SELECT $1, count(*), coalesce(sum(amount_cents), 0) FROM shop.payments
ON CONFLICT (at) DO NOTHING
