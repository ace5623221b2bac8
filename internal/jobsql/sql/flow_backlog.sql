-- flow_backlog: whether queue $1 still has an available job, asked right
-- after a limited queue's claim in its transaction (so its own claims are
-- seen): a claim the limits cut short is tried again soon only while
-- there is a backlog; an idle queue's producer waits for a notification
-- or the poll instead.
SELECT EXISTS (SELECT 1 FROM {{schema}}.jobs WHERE state = 'available' AND queue = $1)
