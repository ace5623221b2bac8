package pgqueue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// QueueList's counts read the backlog, not the table: among 20,000
// finished jobs, the statement reads the rows of its four states' partial
// indexes (blocked among them) and nothing else of jobs.
func TestQueueListReadsOnlyTheBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newPool(t)
	client := newClient(t, pool, nil)
	_, err := pool.Exec(ctx, `
		INSERT INTO pgqueue.jobs (queue, kind, state, attempt, fence, attempted_at, finalized_at)
		SELECT 'q' || (i % 5), 'note', 'completed', 1, i, now(), now() FROM generate_series(1, 20000) i`)
	must(t, err)
	parent, err := client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{Queue: "wf"})
	must(t, err)
	for range 3 {
		_, err := client.Enqueue(ctx, noteArgs{}, &pgqueue.EnqueueOpts{Queue: "wf",
			DependsOn: []pgqueue.Dependency{pgqueue.DependsOnJob(parent.ID)}})
		must(t, err)
	}
	_, err = pool.Exec(ctx, "ANALYZE pgqueue.jobs")
	must(t, err)

	q, err := jobsql.Load(pgqueue.SchemaDefault)
	must(t, err)
	conn, err := pool.Acquire(ctx)
	must(t, err)
	defer conn.Release()
	var out []byte
	must(t, conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.QueueList, pgx.QueryExecModeSimpleProtocol).Scan(&out))
	plan := parsePlan(t, out)
	read, seq := rowsRead(plan)
	var indexes []string
	for _, n := range plan.find(func(n *planNode) bool { return n.Index != "" }) {
		indexes = append(indexes, n.Index)
	}
	t.Logf("rows of jobs read: %.0f, through %v", read, indexes)
	if seq || read > 10 || !strings.Contains(strings.Join(indexes, ","), "jobs_blocked_idx") {
		t.Errorf("queue_list read %.0f rows of jobs (Seq Scan: %v) through %v, want the 4 of the backlog through the partial indexes; plan:\n%s",
			read, seq, indexes, explainText(t, conn, q.QueueList))
	}

	queues, err := client.QueueList(ctx)
	must(t, err)
	if len(queues) != 1 || queues[0].Name != "wf" || queues[0].Blocked != 3 || queues[0].Available != 1 {
		t.Fatalf("QueueList = %+v, want wf with 3 blocked and 1 available", queues)
	}
}
