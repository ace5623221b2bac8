package pgqueue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
)

// A lost lease is one event: it is logged once at WARN, not once by each
// part that notices (heartbeat, executor, completer).
func TestLeaseLostLoggedOnce(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a lost lease logged once, not by each part that notices")
	ctx := context.Background()
	pool := newPool(t)
	var logs testlog.Buffer
	returned := make(chan struct{})
	ws := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(ws, func(ctx context.Context, job *pgqueue.Job[noteArgs]) error {
		<-ctx.Done()
		defer close(returned)
		return context.Cause(ctx) // fails, as most handlers do when cancelled
	}, nil))
	b := startClient(t, pool, ws, &pgqueue.Config{JobLease: time.Second, Logger: logs.Logger()})
	row, err := b.client.Enqueue(ctx, noteArgs{}, nil)
	must(t, err)
	waitState(t, pool, row.ID, "running")
	_, err = pool.Exec(ctx, "UPDATE pgqueue.jobs SET fence = nextval('pgqueue.fence_seq') WHERE id = $1", row.ID)
	must(t, err)
	<-returned
	must(t, b.client.Stop(ctx)) // every part has had its say
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, fmt.Sprintf("job=%d ", row.ID)) && (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 {
		t.Fatalf("%d warnings for one lost lease:\n%s", len(warned), strings.Join(warned, "\n"))
	}
}
