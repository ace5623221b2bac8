package pglock_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgtest"
	"github.com/pgqueue/pgqueue/pglock"
)

// newPool returns a pool on a fresh database of the test's own, closed when
// the test ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.DB().NewDatabase(t))
	must(t, err)
	cfg.MaxConns = int32(pgtest.TestConns())
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	must(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// newLocker returns a Locker on pool; config may be nil.
func newLocker(t testing.TB, pool *pgxpool.Pool, config *pglock.Config) *pglock.Locker {
	t.Helper()
	l, err := pglock.New(pool, config)
	must(t, err)
	return l
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// begin starts a transaction on pool that is rolled back when the test
// ends, unless it was committed first.
func begin(t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	must(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// advisoryHolders returns the backends of this database that hold (granted)
// or wait for (not granted) the two-int4 advisory lock k. pg_locks shows the
// keys as oid, unsigned, hence the conversion.
func advisoryHolders(t *testing.T, pool *pgxpool.Pool, k pglock.Key, granted bool) []int32 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT pid FROM pg_locks
		WHERE locktype = 'advisory'
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		  AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 2
		  AND granted = $3
		ORDER BY pid`, int64(uint32(k.Class)), int64(uint32(k.Object)), granted)
	must(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	must(t, err)
	return pids
}

// singleHolder returns the one backend holding k, failing the test if there
// is not exactly one.
func singleHolder(t *testing.T, pool *pgxpool.Pool, k pglock.Key) int32 {
	t.Helper()
	pids := advisoryHolders(t, pool, k, true)
	if len(pids) != 1 {
		t.Fatalf("lock %+v held by backends %v, want exactly one", k, pids)
	}
	return pids[0]
}

// leaseRow is a lease lock's row as stored.
type leaseRow struct {
	Holder    string
	Fence     int64
	ExpiresAt time.Time
}

func readLease(t *testing.T, pool *pgxpool.Pool, name string) leaseRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT holder, fence, expires_at FROM pgqueue.leases WHERE name = $1", name)
	must(t, err)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[leaseRow])
	must(t, err)
	return r
}
