package pglock_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testlog"
	"github.com/pgqueue/pgqueue/pglock"
)

// A campaign that fails (here: its schema has no tables yet, as after a
// migrate down) is logged once and tried less often, not logged at every
// RetryInterval; once the schema is there, the elector says so and leads.
func TestElectorFailingCampaignSaidOnce(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "a failing campaign said once")
	pool := newPool(t)
	var logs testlog.Buffer
	lk := newLocker(t, pool, &pglock.Config{Schema: "not_yet", Logger: logs.Logger()})
	var leading atomic.Int32
	e := runElector(t, lk, "leader", "a", pglock.ElectorConfig{TTL: 300 * time.Millisecond, RetryInterval: 50 * time.Millisecond}, &leading)
	waitFor(t, "the failed campaign said", func() bool { return strings.Contains(logs.String(), "leader election failed") })
	// An observation window, not a wait: the old code logged a failed
	// campaign every 50 ms in it, 40 lines.
	time.Sleep(2 * time.Second)
	if n := strings.Count(logs.String(), "leader election failed"); n != 1 {
		t.Fatalf("a failing campaign said %d times in 2s, want once:\n%s", n, logs.String())
	}
	if _, err := pgqueue.Migrate(t.Context(), pool, "not_yet"); err != nil {
		t.Fatal(err)
	}
	if tm := e.next(t, 30*time.Second); tm.cause != nil {
		t.Fatalf("first term event %+v, want a term begun", tm)
	}
	if out := logs.String(); !strings.Contains(out, "leader election works again") {
		t.Fatalf("no recovery line:\n%s", out)
	}
}
