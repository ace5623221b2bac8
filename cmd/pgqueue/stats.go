package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

const statsUsage = `Usage: pgqueue stats [flags]

Shows, per queue: paused or not, scheduled, available and running jobs,
how long the oldest available job has waited, and the jobs that finished
(completed, discarded, cancelled) in the last minute and the last hour;
then the running jobs by the client that runs them. Finished counts read
the last hour of finished jobs through their index: on a queue finishing
thousands of jobs a second, a refresh costs a noticeable scan.

Flags:

	--watch             refresh in place until interrupted
	--interval D        refresh interval with --watch (default 2s)
	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
	--json              print JSON instead of tables (one object per
	                    refresh with --watch)
`

// statsJSON is one snapshot of stats.
type statsJSON struct {
	At      time.Time        `json:"at"`
	Queues  []*queueStats    `json:"queues"`
	Workers []*workerRunning `json:"workers"`
}

type queueStats struct {
	queueJSON
	// Finished counts finished jobs by state: "completed" → counts.
	Finished map[string]finishedCounts `json:"finished"`
}

type finishedCounts struct {
	LastMinute int64 `json:"last_minute"`
	LastHour   int64 `json:"last_hour"`
}

type workerRunning struct {
	WorkerID  string `json:"worker_id"`
	Queue     string `json:"queue"`
	Running   int64  `json:"running"`
	LongestMS int64  `json:"longest_ms"`
}

func runStats(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		f        readFlags
		watch    bool
		interval time.Duration
	)
	fs := newFlagSet("stats")
	f.register(fs)
	fs.BoolVar(&watch, "watch", false, "")
	fs.DurationVar(&interval, "interval", 2*time.Second, "")
	err := func() error {
		pos, err := parseArgs(fs, args)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef("stats takes no arguments, got %q", pos)
		}
		if interval <= 0 {
			return usagef("--interval must be positive")
		}
		if err := f.check(); err != nil {
			return err
		}
		q, err := loadOpsQueries(f.schema)
		if err != nil {
			return err
		}
		pool, client, err := f.connect(ctx)
		if err != nil {
			return err
		}
		defer pool.Close()
		for {
			snap, err := readStats(ctx, pool, client, q)
			if err != nil {
				if watch && ctx.Err() != nil {
					return nil // interrupted: the normal end of --watch
				}
				return err
			}
			switch {
			case f.json:
				if err := writeJSON(stdout, snap); err != nil {
					return err
				}
			case watch:
				// Home and clear: the new frame replaces the old in place.
				fmt.Fprint(stdout, "\x1b[H\x1b[2J")
				fmt.Fprintf(stdout, "pgqueue stats  %s  every %v (Ctrl-C to end)\n\n", snap.At.Local().Format("15:04:05"), interval)
				printStats(stdout, snap)
			default:
				printStats(stdout, snap)
			}
			if !watch {
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(interval):
			}
		}
	}()
	return finish("stats", statsUsage, err, stdout, stderr)
}

// readStats reads one snapshot.
func readStats(ctx context.Context, pool *pgxpool.Pool, client *pgqueue.Client, q *opsQueries) (*statsJSON, error) {
	qs, err := client.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	snap := &statsJSON{At: time.Now(), Queues: []*queueStats{}, Workers: []*workerRunning{}}
	byName := map[string]*queueStats{}
	add := func(name string) *queueStats {
		if s := byName[name]; s != nil {
			return s
		}
		s := &queueStats{queueJSON: queueJSON{Name: name}, Finished: map[string]finishedCounts{}}
		for _, st := range []pgqueue.JobState{pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateCancelled} {
			s.Finished[string(st)] = finishedCounts{}
		}
		byName[name] = s
		snap.Queues = append(snap.Queues, s)
		return s
	}
	for _, info := range qs {
		add(info.Name).queueJSON = newQueueJSON(info)
	}
	rows, err := pool.Query(ctx, q.statsFinished)
	if err != nil {
		return nil, fmt.Errorf("read finished jobs: %w", err)
	}
	var (
		name, state string
		c           finishedCounts
	)
	if _, err := pgx.ForEachRow(rows, []any{&name, &state, &c.LastMinute, &c.LastHour}, func() error {
		add(name).Finished[state] = c
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read finished jobs: %w", err)
	}
	slices.SortFunc(snap.Queues, func(a, b *queueStats) int { return cmp.Compare(a.Name, b.Name) })

	rows, err = pool.Query(ctx, q.statsRunning)
	if err != nil {
		return nil, fmt.Errorf("read running jobs: %w", err)
	}
	var (
		w         workerRunning
		longestUS int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&w.WorkerID, &w.Queue, &w.Running, &longestUS}, func() error {
		r := w
		r.LongestMS = longestUS / 1000
		snap.Workers = append(snap.Workers, &r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read running jobs: %w", err)
	}
	return snap, nil
}

func printStats(w io.Writer, s *statsJSON) {
	t := newTable(w, "QUEUE", "PAUSED", "BLOCKED", "SCHEDULED", "AVAILABLE", "RUNNING", "OLDEST AVAILABLE",
		"COMPLETED 1m/1h", "DISCARDED 1m/1h", "CANCELLED 1m/1h")
	for _, q := range s.Queues {
		fin := func(state string) string {
			c := q.Finished[state]
			return fmt.Sprintf("%d/%d", c.LastMinute, c.LastHour)
		}
		t.row(q.Name, yesNo(q.Paused), strconv.FormatInt(q.Blocked, 10), strconv.FormatInt(q.Scheduled, 10), strconv.FormatInt(q.Available, 10),
			strconv.FormatInt(q.Running, 10), age(time.Duration(q.OldestAvailableAgeMS)*time.Millisecond),
			fin("completed"), fin("discarded"), fin("cancelled"))
	}
	t.flush()
	if len(s.Queues) == 0 {
		fmt.Fprintln(w, "(no queue has unfinished jobs, a pause, or jobs finished in the last hour)")
	}
	fmt.Fprintln(w)
	if len(s.Workers) == 0 {
		fmt.Fprintln(w, "no job is running")
		return
	}
	t = newTable(w, "WORKER", "QUEUE", "RUNNING", "LONGEST")
	for _, r := range s.Workers {
		t.row(r.WorkerID, r.Queue, strconv.FormatInt(r.Running, 10), age(time.Duration(r.LongestMS)*time.Millisecond))
	}
	t.flush()
}
