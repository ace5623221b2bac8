package pgqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pglock"
)

// appRolePool creates a login role holding only pgqueue.Grants on the
// test database's schema (migrated by the owner, as newPool does) and
// returns a pool connected as it.
func appRolePool(t *testing.T, owner *pgxpool.Pool) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role, password := "pgq_app_"+hex.EncodeToString(b), hex.EncodeToString(b)+"pw"
	// Roles are cluster-wide: name it uniquely, drop it after the test.
	_, err := owner.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password))
	must(t, err)
	t.Cleanup(func() {
		_, _ = owner.Exec(ctx, "DROP OWNED BY "+role)
		_, _ = owner.Exec(ctx, "DROP ROLE "+role)
	})
	// No CONNECT or TEMP on the database beyond PUBLIC's, nothing on
	// schema public: only the grants.
	grants, err := pgqueue.GrantsSQL(pgqueue.SchemaDefault, role)
	must(t, err)
	_, err = owner.Exec(ctx, grants)
	must(t, err)
	cfg := owner.Config().Copy()
	cfg.ConnConfig.User, cfg.ConnConfig.Password = role, password
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	must(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// Migrate on a current schema as a role without CREATE changes nothing
// and succeeds; it used to run CREATE SCHEMA IF NOT EXISTS first (42501).
func TestMigrateCurrentSchemaAsAppRole(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "Migrate of a current schema as a role without CREATE")
	ctx := context.Background()
	owner := newPool(t)
	app := appRolePool(t, owner)
	res, err := pgqueue.Migrate(ctx, app, pgqueue.SchemaDefault)
	if err != nil {
		t.Fatal(err)
	}
	if res.Changed() || res.To == 0 {
		t.Fatalf("Migrate as the app role: %+v", res)
	}
	// A schema behind is the owner's job: the app role may not migrate it.
	_, err = pgqueue.Migrate(ctx, app, "other_schema")
	if err == nil {
		t.Fatal("app role created a schema")
	}
}

type privArgs struct {
	N int `json:"n"`
}

func (privArgs) Kind() string { return "priv" }

// The whole feature set runs as a role holding only the printed grants:
// enqueue (single, batch, COPY), work, automatic and manual retry, cancel,
// pause and resume, JobList, the scheduler, the rescuer and periodic jobs
// of the maintenance leader, and pglock's transaction, session and lease
// locks and elector.
func TestFeatureSetAsAppRole(t *testing.T) {
	t.Parallel()
	skipInShortMode(t, "the whole feature set run as a role with only the printed grants")
	ctx := context.Background()
	owner := newPool(t)
	app := appRolePool(t, owner)
	if _, err := pgqueue.Migrate(ctx, app, pgqueue.SchemaDefault); err != nil {
		t.Fatal(err)
	}

	var attempts atomic.Int64
	done := make(chan int, 1000)
	workers := pgqueue.NewWorkers()
	must(t, pgqueue.AddWorkerFunc(workers, func(ctx context.Context, job *pgqueue.Job[privArgs]) error {
		if job.Args.N < 0 && attempts.Add(1) == 1 {
			return errors.New("first attempt fails")
		}
		done <- job.Args.N
		return nil
	}, nil))
	periodic := pgqueue.NewPeriodicJob("priv_periodic", pgqueue.EverySchedule(time.Hour),
		func() (pgqueue.JobArgs, *pgqueue.EnqueueOpts) { return privArgs{N: 1000}, nil },
		&pgqueue.PeriodicJobOpts{RunOnStart: true})
	c := newClient(t, app, &pgqueue.Config{
		Workers:           workers,
		Queues:            map[string]pgqueue.QueueConfig{pgqueue.QueueDefault: {MaxWorkers: 4}},
		PeriodicJobs:      []*pgqueue.PeriodicJob{periodic},
		FetchPollInterval: 50 * time.Millisecond,
		SchedulerInterval: 50 * time.Millisecond,
		RescueInterval:    50 * time.Millisecond,
	})

	// A job stuck with a dead worker, for the rescuer; a scheduled one
	// written by COPY, for the scheduler; a failing one (MaxAttempts 1),
	// for JobRetry; one to cancel.
	stuck, err := c.Enqueue(ctx, privArgs{N: 1}, nil)
	must(t, err)
	claimAsDeadWorker(t, owner, stuck.ID)
	batch := make([]pgqueue.EnqueueManyParams, pgqueue.CopyThreshold)
	for i := range batch {
		batch[i] = pgqueue.EnqueueManyParams{Args: privArgs{N: 10 + i}, Opts: &pgqueue.EnqueueOpts{RunAt: time.Now().Add(-time.Second)}}
	}
	_, err = c.EnqueueMany(ctx, batch)
	must(t, err)
	_, err = c.EnqueueMany(ctx, batch[:2])
	must(t, err)
	// A workflow: the child released by its parent's completion.
	flow, err := c.EnqueueMany(ctx, []pgqueue.EnqueueManyParams{{Args: privArgs{N: 2000}},
		{Args: privArgs{N: 2001}, Opts: &pgqueue.EnqueueOpts{DependsOn: []pgqueue.Dependency{pgqueue.DependsOnIndex(0)}}}})
	must(t, err)
	failing, err := c.Enqueue(ctx, privArgs{N: -1}, &pgqueue.EnqueueOpts{MaxAttempts: 1})
	must(t, err)
	later, err := c.Enqueue(ctx, privArgs{N: 2}, &pgqueue.EnqueueOpts{RunAt: time.Now().Add(time.Hour)})
	must(t, err)
	if _, err := c.JobCancel(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	must(t, c.QueuePause(ctx, pgqueue.QueueDefault))
	must(t, c.QueueResume(ctx, pgqueue.QueueDefault))

	must(t, c.Start(ctx))
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	want := 1 + pgqueue.CopyThreshold + 2 + 1 + 2 // stuck, COPY, small batch, periodic, workflow
	seen := map[int]int{}
	for range want {
		select {
		case n := <-done:
			seen[n]++
		case <-time.After(30 * time.Second):
			t.Fatalf("ran %d of %d jobs: %v", len(seen), want, seen)
		}
	}
	if seen[1] != 1 || seen[1000] != 1 || seen[2001] != 1 {
		t.Fatalf("rescued, periodic or workflow job did not run once: %v", seen)
	}
	waitState(t, owner, flow.IDs[1], "completed")
	if w, err := c.WorkflowGet(ctx, flow.Workflow); err != nil || !w.Done() {
		t.Fatalf("WorkflowGet: %v", err)
	}
	waitState(t, owner, failing.ID, "discarded")
	if _, err := c.JobRetry(ctx, failing.ID); err != nil {
		t.Fatal(err)
	}
	waitState(t, owner, failing.ID, "completed")
	waitState(t, owner, later.ID, "cancelled")
	list, err := c.JobList(ctx, &pgqueue.JobListParams{States: []pgqueue.JobState{pgqueue.StateCancelled}})
	must(t, err)
	if len(list.Jobs) != 1 || list.Jobs[0].ID != later.ID {
		t.Fatalf("JobList cancelled: %d jobs", len(list.Jobs))
	}

	locker, err := pglock.New(app, nil)
	must(t, err)
	must(t, pgx.BeginFunc(ctx, app, func(tx pgx.Tx) error {
		_, err := locker.LockXact(ctx, tx, "priv-xact")
		return err
	}))
	lease, err := locker.TryLockLease(ctx, "priv-lease", "me", time.Minute)
	must(t, err)
	must(t, lease.Renew(ctx))
	must(t, lease.Release(ctx))
	session, err := locker.TryLockSession(ctx, "priv-session", nil)
	must(t, err)
	must(t, session.Unlock(ctx))
	elector, err := locker.NewElector("priv-leader", nil)
	must(t, err)
	electCtx, cancel := context.WithCancel(ctx)
	led := make(chan struct{})
	go elector.Run(electCtx, func(ctx context.Context, term int64) {
		close(led)
		<-ctx.Done()
	})
	select {
	case <-led:
	case <-time.After(30 * time.Second):
		t.Fatal("elector never led")
	}
	cancel()
}

// Grants refuses a role that is not a plain identifier.
func TestGrantsInvalidRole(t *testing.T) {
	for _, role := range []string{"", "App", "a b", "x; DROP TABLE y"} {
		if _, err := pgqueue.GrantsSQL(pgqueue.SchemaDefault, role); !errors.Is(err, pgqueue.ErrInvalid) {
			t.Fatalf("%q: %v", role, err)
		}
	}
	if _, err := pgqueue.GrantsSQL("Bad", "app"); !errors.Is(err, pgqueue.ErrInvalid) {
		t.Fatalf("bad schema: %v", err)
	}
}

// Migrate against a server that cannot be reached says it was connecting,
// not "create schema:".
func TestMigrateUnreachableSaysConnect(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none?connect_timeout=2")
	must(t, err)
	defer pool.Close()
	_, err = pgqueue.Migrate(context.Background(), pool, pgqueue.SchemaDefault)
	if err == nil || !strings.Contains(err.Error(), "migrate: connect:") || strings.Contains(err.Error(), "create schema") {
		t.Fatalf("Migrate on an unreachable server: %v", err)
	}
	_, err = pgqueue.NewMigrator(context.Background(), pool, pgqueue.SchemaDefault)
	if err == nil || !strings.Contains(err.Error(), "migrate: connect:") {
		t.Fatalf("NewMigrator on an unreachable server: %v", err)
	}
}
