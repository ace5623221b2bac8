package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pglock"
)

const locksUsage = `Usage: pgqueue locks [flags]

Shows the locks that decide who does what:

  - lease locks: the rows of <schema>.leases (pglock lease locks, and
    "pgqueue:maintenance", the maintenance leader's), with holder, fence
    and the time left, by the database clock;
  - advisory locks held or awaited in the database right now (pg_locks),
    with the session behind each (pg_stat_activity: pid, application,
    client address, user): pglock's transaction and session locks,
    singleton jobs' locks (named when a running job carries the key),
    leaders' session locks ("pglock:elector:<lease>"), golang-migrate's
    lock and any other application's.

Flags:

	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--json              print JSON instead of tables
`

type leaseJSON struct {
	Name        string    `json:"name"`
	Holder      string    `json:"holder"`
	Fence       int64     `json:"fence"`
	AcquiredAt  time.Time `json:"acquired_at"`
	RemainingMS int64     `json:"remaining_ms"`
	Expired     bool      `json:"expired"`
}

type advisoryJSON struct {
	// Key is the lock's key as pg_locks shows it: "classid:objid" for the
	// two-int4 form, the bigint for the one-bigint form.
	Key string `json:"key"`
	// Owner says whose key it is: "pgqueue" for this schema's pglock keys,
	// "other" otherwise.
	Owner       string `json:"owner"`
	Name        string `json:"name,omitempty"`
	Mode        string `json:"mode"`
	Granted     bool   `json:"granted"`
	PID         int32  `json:"pid"`
	Application string `json:"application"`
	ClientAddr  string `json:"client_addr"`
	User        string `json:"user"`
	State       string `json:"state"`
	SessionMS   int64  `json:"session_ms"`
}

type locksJSON struct {
	Leases   []leaseJSON    `json:"leases"`
	Advisory []advisoryJSON `json:"advisory"`
}

func runLocks(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f readFlags
	fs := newFlagSet("locks")
	f.register(fs)
	err := func() error {
		pos, err := parseArgs(fs, args)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef("locks takes no arguments, got %q", pos)
		}
		if err := f.check(); err != nil {
			return err
		}
		q, err := loadOpsQueries(f.schema)
		if err != nil {
			return err
		}
		pool, _, err := f.connect(ctx)
		if err != nil {
			return err
		}
		defer pool.Close()
		locker, err := pglock.New(pool, &pglock.Config{Schema: f.schema})
		if err != nil {
			return err
		}
		out, err := readLocks(ctx, pool, q, locker)
		if err != nil {
			return err
		}
		if f.json {
			return writeJSON(stdout, out)
		}
		printLocks(stdout, out)
		return nil
	}()
	return finish("locks", locksUsage, err, stdout, stderr)
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func readLocks(ctx context.Context, db querier, q *opsQueries, locker *pglock.Locker) (*locksJSON, error) {
	out := &locksJSON{Leases: []leaseJSON{}, Advisory: []advisoryJSON{}}
	rows, err := db.Query(ctx, q.locksLeases)
	if err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}
	var (
		l           leaseJSON
		remainingUS int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&l.Name, &l.Holder, &l.Fence, &l.AcquiredAt, &remainingUS}, func() error {
		r := l
		r.RemainingMS, r.Expired = remainingUS/1000, remainingUS <= 0
		out.Leases = append(out.Leases, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read leases: %w", err)
	}

	// The names pgqueue knows: running singleton jobs' keys, and the
	// session lock of each lease's election (a leader's, with
	// SessionFailover).
	names := map[pglock.Key]string{}
	for _, l := range out.Leases {
		name := pglock.ElectorSessionLock(l.Name)
		names[locker.Key(name)] = name
	}
	rows, err = db.Query(ctx, q.runningSingletons)
	if err != nil {
		return nil, fmt.Errorf("read singleton keys: %w", err)
	}
	var key string
	if _, err := pgx.ForEachRow(rows, []any{&key}, func() error {
		name := pgqueue.SingletonResource(key)
		names[locker.Key(name)] = name
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read singleton keys: %w", err)
	}
	class := locker.Key("").Class

	rows, err = db.Query(ctx, q.locksAdvisory)
	if err != nil {
		return nil, fmt.Errorf("read advisory locks: %w", err)
	}
	var (
		a             advisoryJSON
		classID, obj  int64
		subID         int32
		pid           *int32
		sessionMicros int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&classID, &obj, &subID, &a.Mode, &a.Granted, &pid,
		&a.Application, &a.ClientAddr, &a.User, &a.State, &sessionMicros}, func() error {
		r := a
		if pid != nil {
			r.PID = *pid
		}
		r.SessionMS = sessionMicros / 1000
		r.Owner = "other"
		if subID == 2 { // two int4 keys: pglock's form
			k := pglock.Key{Class: int32(uint32(classID)), Object: int32(uint32(obj))}
			r.Key = fmt.Sprintf("%d:%d", k.Class, k.Object)
			if k.Class == class {
				r.Owner, r.Name = "pgqueue", names[k]
			}
		} else { // one bigint key, high half in classid
			r.Key = strconv.FormatInt(int64(uint64(classID)<<32|uint64(obj)), 10)
		}
		out.Advisory = append(out.Advisory, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read advisory locks: %w", err)
	}
	return out, nil
}

func printLocks(w io.Writer, l *locksJSON) {
	fmt.Fprintln(w, "LEASE LOCKS")
	if len(l.Leases) == 0 {
		fmt.Fprintln(w, "(none)")
	} else {
		t := newTable(w, "NAME", "HOLDER", "FENCE", "ACQUIRED", "EXPIRES IN")
		for _, x := range l.Leases {
			left := age(time.Duration(x.RemainingMS) * time.Millisecond)
			if x.Expired {
				left = "expired"
			}
			t.row(x.Name, x.Holder, strconv.FormatInt(x.Fence, 10), when(x.AcquiredAt), left)
		}
		t.flush()
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ADVISORY LOCKS")
	if len(l.Advisory) == 0 {
		fmt.Fprintln(w, "(none)")
		return
	}
	t := newTable(w, "KEY", "OWNER", "NAME", "MODE", "GRANTED", "PID", "APPLICATION", "CLIENT", "USER", "STATE", "SESSION AGE")
	for _, x := range l.Advisory {
		t.row(x.Key, x.Owner, cmpDash(x.Name), x.Mode, yesNo(x.Granted), strconv.Itoa(int(x.PID)),
			cmpDash(x.Application), cmpDash(x.ClientAddr), cmpDash(x.User), cmpDash(x.State), age(time.Duration(x.SessionMS)*time.Millisecond))
	}
	t.flush()
}
