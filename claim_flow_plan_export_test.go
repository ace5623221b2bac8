package pgqueue

// FlowBacklogSQL is sql/flow_backlog.sql of the client's schema, the
// statement a limited queue's claim sends after it, for EXPLAIN.
func FlowBacklogSQL(c *Client) string { return c.q.FlowBacklog }
