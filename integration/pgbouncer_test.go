//go:build unix

package integration_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/internal/pgbouncer"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

var doneLine = regexp.MustCompile(`^done got=(\d+) busy=(\d+) refused=(\d+) errors=(\d+)$`)

// Session locks through a real PgBouncer in transaction mode, two
// processes of 8 goroutines, 200 attempts each on one name, while load
// goroutines keep the pooler's few server connections busy. Without a
// direct connection every attempt is refused with ErrNoSessionAffinity,
// idle pool or not. With one (pglock.Config.DirectConnConfig) the lock is
// taken and released thousands of times and the database clock never
// saw two holders at once. Either way no advisory lock is left once the
// processes are gone, although PgBouncer keeps its server sessions.
func TestSessionLockThroughPgBouncer(t *testing.T) {
	direct := pgtest.DB().NewDatabase(t)
	bouncer := pgbouncer.Require(t, direct, &pgbouncer.Options{PoolSize: 4})
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE holds (id bigserial PRIMARY KEY, proc text, worker int, fence bigint,
		started timestamptz NOT NULL, ended timestamptz)`); err != nil {
		t.Fatal(err)
	}
	dbname := pool.Config().ConnConfig.Database
	through := bouncer.ConnString(dbname) + "&default_query_exec_mode=exec"
	bin := buildBinary(t, "github.com/pgqueue/pgqueue/integration/sessionlocker")
	// Every attempt with a direct connection dials one, and one in four
	// waits up to 200 ms: 1,000 attempts a goroutine ran past the 10
	// minutes below on a loaded 2-core machine. 200 still give hundreds of
	// holds, each a chance to overlap.
	attempts := 200
	if testing.Short() {
		attempts = 50
	}

	// run runs the two processes and returns their counts, and the holds
	// recorded and how many pairs of them overlap.
	run := func(t *testing.T, directURL string) (got, busy, refused, rows, overlaps int) {
		t.Helper()
		if _, err := pool.Exec(ctx, "TRUNCATE holds"); err != nil {
			t.Fatal(err)
		}
		var procs []*workerProc
		for _, name := range []string{"a", "b"} {
			args := []string{"-pool", through, "-proc", name, "-goroutines", "8", "-attempts", strconv.Itoa(attempts)}
			if directURL != "" {
				args = append(args, "-direct", directURL)
			}
			procs = append(procs, startWorkerProc(t, "sessionlocker", name, bin, filepath.Join(t.TempDir(), name+".log"), args...))
		}
		for _, p := range procs {
			p.waitLine(t, "done ", 10*time.Minute, true)
			p.mu.Lock()
			lines := append([]string(nil), p.stdout...)
			p.mu.Unlock()
			for _, line := range lines {
				m := doneLine.FindStringSubmatch(line)
				if m == nil {
					continue
				}
				n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
				if n(4) != 0 {
					t.Errorf("%s: %s; %s", p.label(), line, p.logTail())
				}
				got, busy, refused = got+n(1), busy+n(2), refused+n(3)
			}
		}
		// They exit by themselves once done.
		for _, p := range procs {
			select {
			case <-p.exited:
				if p.waitErr != nil {
					t.Errorf("%s: %v; %s", p.label(), p.waitErr, p.logTail())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not exit after done", p.label())
			}
		}
		// PgBouncer still holds its server sessions: a lock taken through
		// one of them would still be there.
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE l.locktype = 'advisory' AND d.datname = current_database()`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Errorf("%d advisory locks left after the processes exited", left)
		}
		var open int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM holds), (SELECT count(*) FROM holds WHERE ended IS NULL),
			(SELECT count(*) FROM holds a JOIN holds b ON a.id < b.id
			   AND tstzrange(a.started, a.ended, '[]') && tstzrange(b.started, b.ended, '[]'))`).Scan(&rows, &open, &overlaps); err != nil {
			t.Fatal(err)
		}
		if open != 0 {
			t.Errorf("%d holds never ended", open)
		}
		if overlaps != 0 {
			t.Errorf("%d pairs of holds overlap: two holders at once", overlaps)
		}
		return got, busy, refused, rows, overlaps
	}

	t.Run("NoDirectConnectionRefusedEveryTime", func(t *testing.T) {
		got, busy, refused, _, overlaps := run(t, "")
		t.Logf("through PgBouncer alone: %d attempts, got %d, busy %d, refused %d; %d overlapping pairs of holds", 2*8*attempts, got, busy, refused, overlaps)
		if got != 0 || refused != 2*8*attempts-busy || refused == 0 {
			t.Fatalf("got %d, busy %d, refused %d of %d attempts: want every attempt refused (busy only from the process-local guard)", got, busy, refused, 2*8*attempts)
		}
	})

	t.Run("DirectConnectionNeverTwoHolders", func(t *testing.T) {
		started := time.Now()
		got, busy, refused, rows, overlaps := run(t, direct)
		t.Logf("through PgBouncer with a direct lock connection: %d attempts in %v, got %d, busy %d, refused %d; %d holds recorded, %d overlapping pairs",
			2*8*attempts, time.Since(started).Round(time.Millisecond), got, busy, refused, rows, overlaps)
		if refused != 0 || got == 0 || rows != got {
			t.Fatalf("got %d, refused %d, %d holds", got, refused, rows)
		}
	})
	if t.Failed() {
		fmt.Println(bouncer.Log())
	}
}
