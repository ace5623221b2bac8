package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// spares is how many clones wait ready beyond the one each maker
	// holds: enough for the tests that start at once.
	spares = 4
	// makers is how many goroutines clone, and droppers how many drop,
	// while the tests run: all of them take turns on harnessConns
	// connections. Concurrent drops share their checkpoints (PostgreSQL
	// 15 checkpoints for every DROP DATABASE).
	makers   = 2
	droppers = 2
	// closeDroppers is at most how many drop at once in Close, when the
	// tests are over and the budget is free.
	closeDroppers = 8
	// queuedDrops is how many ended tests' databases may wait for their
	// drop before a test's cleanup waits in turn.
	queuedDrops = 256
	// failedCloneBackoff keeps a maker that failed from failing again at
	// once (the server is gone, the template unusable).
	failedCloneBackoff = 100 * time.Millisecond
)

// TimingEnv names the variable that, set, makes Main print what the
// clones cost: how many, their mean time, and how long tests waited for
// one.
const TimingEnv = "PGQUEUE_TEST_TIMING"

// harness makes a template's clones before the tests ask for them and
// drops them after the tests end, so that neither costs a test's time: a
// clone takes from tens of milliseconds on the suite's own server to
// hundreds on a shared one that syncs to disk. It holds at most
// harnessConns() connections of the binary's budget.
type harness struct {
	server *Server
	admin  *pgxpool.Pool
	create string // the CREATE DATABASE statement, with %s for the name
	err    error  // why the harness could not start, for every take

	ready   chan clone
	drops   chan string
	turns   chan struct{}      // a connection's turn, harnessConns of them
	stop    context.CancelFunc // stops the makers
	makers  sync.WaitGroup
	dropper sync.WaitGroup

	errMu   sync.Mutex
	dropErr error // the first failed drop, for Close

	mu     sync.RWMutex // closed, and sends on drops
	closed bool

	cloned, cloneTime, waitTime, dropped, dropTime atomic.Int64

	madeMu sync.Mutex
	made   []string // every clone tried, for the tests of pgtest
}

// clone is a database made ahead, or why making it failed.
type clone struct {
	name string
	err  error
}

// start starts the harness of t: the makers and the dropper.
func (t *Template) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{server: t.server, ready: make(chan clone, spares), drops: make(chan string, queuedDrops), stop: cancel}
	t.h = h
	cfg, err := pgxpool.ParseConfig(t.server.AdminConnString())
	if err != nil {
		h.err = fmt.Errorf("harness: %w", err)
		return
	}
	// The whole budget, for Close; while the tests run, turns keeps to
	// the harness's share.
	cfg.MaxConns = int32(MaxConns())
	h.turns = make(chan struct{}, harnessConns(MaxConns()))
	if h.admin, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		h.err = fmt.Errorf("harness: %w", err)
		return
	}
	h.create = "CREATE DATABASE %s TEMPLATE " + t.ident()
	// FILE_COPY copies the template's files and checkpoints, rather than
	// writing every page to the WAL (WAL_LOG, the default since 15): 3
	// times quicker on the suite's own server, where fsync is off. Not on
	// a shared server: its two checkpoints per clone would flush, and
	// sync, everyone's writes.
	if t.server.Source() != SourceDatabaseURL {
		var version int
		vctx, vcancel := context.WithTimeout(ctx, dropTimeout)
		err := h.admin.QueryRow(vctx, "SELECT current_setting('server_version_num')::int").Scan(&version)
		vcancel()
		if err != nil {
			h.err = fmt.Errorf("harness: server version: %w", err)
			return
		}
		if version >= 150000 {
			h.create += " STRATEGY FILE_COPY"
		}
	}
	for range droppers {
		h.dropper.Add(1)
		go h.dropAll(true)
	}
	for range makers {
		h.makers.Add(1)
		go h.make(ctx)
	}
}

// take returns a clone made ahead, waiting for one if need be.
func (h *harness) take(ctx context.Context) (string, error) {
	if h.err != nil {
		return "", h.err
	}
	start := time.Now()
	defer func() { h.waitTime.Add(int64(time.Since(start))) }()
	select {
	case c := <-h.ready:
		return c.name, c.err
	case <-ctx.Done():
		return "", fmt.Errorf("wait for a database: %w", ctx.Err())
	}
}

// dropLater queues a test's database for its drop, or drops it at once
// once Close has run (a test of the template itself).
func (h *harness) dropLater(name string) error {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if !h.closed && h.admin != nil {
		h.drops <- name
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, h.server.AdminConnString())
	if err != nil {
		return fmt.Errorf("drop database: connect: %w", err)
	}
	defer conn.Close(ctx)
	return dropDatabase(ctx, conn, name)
}

// make clones the template until ctx ends, passing each clone on.
func (h *harness) make(ctx context.Context) {
	defer h.makers.Done()
	for ctx.Err() == nil {
		name := randomName(databasePrefix)
		select {
		case h.turns <- struct{}{}:
		case <-ctx.Done():
			return
		}
		h.madeMu.Lock()
		h.made = append(h.made, name)
		h.madeMu.Unlock()
		start := time.Now()
		// Not cancelled by Close: a CREATE DATABASE cancelled in flight
		// may still commit after the DROP meant to clean it up.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
		err := h.createDatabase(cctx, name)
		cancel()
		<-h.turns
		switch {
		case err == nil:
			h.cloned.Add(1)
			h.cloneTime.Add(int64(time.Since(start)))
			select {
			case h.ready <- clone{name: name}:
			case <-ctx.Done():
				h.drops <- name
			}
		case ctx.Err() != nil:
			return
		default:
			select {
			case h.ready <- clone{err: err}:
			case <-ctx.Done():
			}
			select {
			case <-time.After(failedCloneBackoff):
			case <-ctx.Done():
			}
		}
	}
}

// dropAll drops the queued databases until the queue closes, taking
// turns when the tests still run.
func (h *harness) dropAll(turns bool) {
	defer h.dropper.Done()
	for name := range h.drops {
		if turns {
			h.turns <- struct{}{}
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		err := dropDatabase(ctx, h.admin, name)
		cancel()
		if turns {
			<-h.turns
		}
		h.errMu.Lock()
		if err != nil && h.dropErr == nil {
			h.dropErr = err
		}
		h.errMu.Unlock()
		h.dropped.Add(1)
		h.dropTime.Add(int64(time.Since(start)))
	}
}

// close stops the makers, drops the clones no test took and waits for
// every queued drop.
func (h *harness) close(ctx context.Context) error {
	if h.admin == nil {
		return nil
	}
	h.stop()
	h.makers.Wait()
	h.mu.Lock()
	for len(h.ready) > 0 {
		if c := <-h.ready; c.err == nil {
			h.drops <- c.name
		}
	}
	h.closed = true
	close(h.drops)
	h.mu.Unlock()
	// The tests are over: what is left drops on more connections at once.
	for range min(closeDroppers, MaxConns()) - droppers {
		h.dropper.Add(1)
		go h.dropAll(false)
	}
	done := make(chan struct{})
	go func() { h.dropper.Wait(); close(done) }()
	var err error
	select {
	case <-done:
		h.errMu.Lock()
		err = h.dropErr
		h.errMu.Unlock()
	case <-ctx.Done():
		err = fmt.Errorf("pgtest: wait for the tests' databases to drop: %w", ctx.Err())
	}
	if os.Getenv(TimingEnv) != "" {
		fmt.Fprintln(os.Stderr, h.timing())
	}
	h.admin.Close()
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	return nil
}

// timing says what the clones cost, for TimingEnv.
func (h *harness) timing() string {
	mean := func(total, n int64) string {
		if n == 0 {
			return "-"
		}
		return (time.Duration(total / n)).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("pgtest: %d clones made up to %d at once, %s each (%s); tests waited %s for them in all; %d dropped, %s each",
		h.cloned.Load(), harnessConns(MaxConns()), mean(h.cloneTime.Load(), h.cloned.Load()), h.create[len("CREATE DATABASE %s "):],
		time.Duration(h.waitTime.Load()).Round(time.Millisecond), h.dropped.Load(), mean(h.dropTime.Load(), h.dropped.Load()))
}

func (h *harness) createDatabase(ctx context.Context, name string) error {
	sql := fmt.Sprintf(h.create, pgx.Identifier{name}.Sanitize())
	var err error
	for attempt := 1; ; attempt++ {
		_, err = h.admin.Exec(ctx, sql)
		if err == nil || attempt == createAttempts || !isObjectInUse(err) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create database: %w", ctx.Err())
		case <-time.After(time.Duration(attempt) * createBackoff):
		}
	}
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// dropDatabase drops the database name, even if still in use.
func dropDatabase(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, name string) error {
	if _, err := db.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}
