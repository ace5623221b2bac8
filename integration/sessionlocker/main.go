// Command sessionlocker is the process of pgqueue's session-lock test
// through a real PgBouncer (integration/pgbouncer_test.go). Its goroutines
// try, over and over, to take one session lock with pglock, and while
// holding it record when they held it, [started, ended] by the database
// clock, in holds(proc, worker, fence, started, ended): two rows whose
// intervals overlap are two holders at once. Meanwhile load goroutines
// keep the pooler's server connections busy.
//
// It prints "ready" once connected, then, when every attempt is done, one
// line "done got=N busy=N refused=N errors=N" (refused: ErrNoSessionAffinity)
// and the first error, if any, on stderr. Exit code 0 unless it could not
// start.
//
// Usage:
//
//	sessionlocker -pool postgres://...(through the pooler) [-direct postgres://...] -proc a [-goroutines 8] [-attempts 1000]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue/pglock"
)

func main() {
	poolURL := flag.String("pool", "", "connection string through the pooler")
	directURL := flag.String("direct", "", "direct connection string for session locks (none: the pool's)")
	proc := flag.String("proc", "a", "this process's name in holds")
	goroutines := flag.Int("goroutines", 8, "goroutines taking the lock")
	attempts := flag.Int("attempts", 1000, "attempts per goroutine")
	load := flag.Int("load", 4, "goroutines keeping the pooler busy")
	name := flag.String("name", "shared", "lock name")
	flag.Parse()
	if err := run(*poolURL, *directURL, *proc, *name, *goroutines, *attempts, *load); err != nil {
		fmt.Fprintln(os.Stderr, "sessionlocker:", err)
		os.Exit(1)
	}
}

func run(poolURL, directURL, proc, name string, goroutines, attempts, load int) error {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, poolURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	cfg := &pglock.Config{}
	if directURL != "" {
		if cfg.DirectConnConfig, err = pgx.ParseConfig(directURL); err != nil {
			return err
		}
	}
	lk, err := pglock.New(pool, cfg)
	if err != nil {
		return err
	}
	if err := pool.Ping(ctx); err != nil {
		return err
	}
	fmt.Println("ready")

	var got, busy, refused, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, &err)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var loadWG sync.WaitGroup
	for range load {
		loadWG.Add(1)
		go func() {
			defer loadWG.Done()
			for loadCtx.Err() == nil {
				if _, err := pool.Exec(loadCtx, "SELECT pg_sleep(0.002)"); err != nil && loadCtx.Err() == nil {
					fail(fmt.Errorf("load: %w", err))
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range attempts {
				var lock *pglock.SessionLock
				var err error
				timedOut := false
				if i%4 == 3 {
					// Now and then wait, as LockSession does, a while.
					wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
					lock, err = lk.LockSession(wctx, name, nil)
					timedOut = err != nil && wctx.Err() != nil
					cancel()
				} else {
					lock, err = lk.TryLockSession(ctx, name, nil)
				}
				switch {
				case errors.Is(err, pglock.ErrNoSessionAffinity):
					refused.Add(1)
					continue
				case errors.Is(err, pglock.ErrBusy), timedOut:
					busy.Add(1)
					continue
				case err != nil:
					fail(err)
					continue
				}
				got.Add(1)
				var id int64
				err = pool.QueryRow(ctx, "INSERT INTO holds (proc, worker, fence, started) VALUES ($1, $2, $3, clock_timestamp()) RETURNING id",
					proc, g, lock.Fence()).Scan(&id)
				if err == nil {
					_, err = pool.Exec(ctx, "UPDATE holds SET ended = clock_timestamp() WHERE id = $1", id)
				}
				if err != nil {
					fail(err)
				}
				if err := lock.Unlock(ctx); err != nil {
					fail(fmt.Errorf("unlock: %w", err))
				}
			}
		}()
	}
	wg.Wait()
	stopLoad()
	loadWG.Wait()
	fmt.Printf("done got=%d busy=%d refused=%d errors=%d\n", got.Load(), busy.Load(), refused.Load(), failed.Load())
	if p := firstErr.Load(); p != nil {
		fmt.Fprintln(os.Stderr, "first error:", *p)
	}
	return nil
}
