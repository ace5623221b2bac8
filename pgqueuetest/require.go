package pgqueuetest

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// DB is what the assertions read through: a *pgxpool.Pool, a *pgx.Conn
// or a pgx.Tx (to see what a transaction wrote before it commits).
type DB interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Match selects the enqueued jobs an assertion counts, besides their
// kind. The zero value matches every job of the kind.
type Match struct {
	// Args, if not nil, must be contained in the job's args, by
	// PostgreSQL's jsonb containment: a map or a struct with only the
	// fields to compare (omitempty), or a json.RawMessage.
	Args any
	// Queue, if not empty, is the job's queue.
	Queue string
	// Priority, if not nil, is the job's priority.
	Priority *int16
	// ScheduledAt, if not zero, is when the job is due (run_at), within
	// ScheduledWithin (default one second), for the clocks of the test
	// and of the database.
	ScheduledAt     time.Time
	ScheduledWithin time.Duration
	// MaxAttempts, if not zero, is the job's MaxAttempts.
	MaxAttempts int
	// Tags must all be among the job's tags.
	Tags []string
	// Unique, if not nil, says whether the job is unique (was inserted
	// with EnqueueOpts.Unique).
	Unique *bool
	// SingletonKey, if not empty, is the job's singleton key.
	SingletonKey string
	// State, if not empty, is the job's state.
	State pgqueue.JobState
	// Schema is the pgqueue schema to look in. Default
	// pgqueue.SchemaDefault.
	Schema string
}

// Ptr returns a pointer to v, for Match.Priority and Match.Unique.
func Ptr[T any](v T) *T { return &v }

// Enqueued is a job as the assertions read it.
type Enqueued struct {
	*pgqueue.JobRow
	// Unique reports whether the job has a unique key.
	Unique bool
}

// RequireEnqueued fails the test unless exactly one job of args' kind
// (args only gives the kind: compare args with m.Args) matches m, and
// returns it. m may be nil.
func RequireEnqueued(ctx context.Context, tb testing.TB, db DB, args pgqueue.JobArgs, m *Match) *Enqueued {
	tb.Helper()
	jobs := RequireEnqueuedN(ctx, tb, db, args, m, 1)
	return jobs[0]
}

// RequireEnqueuedN fails the test unless exactly n jobs of args' kind
// match m, and returns them, oldest first.
func RequireEnqueuedN(ctx context.Context, tb testing.TB, db DB, args pgqueue.JobArgs, m *Match, n int) []*Enqueued {
	tb.Helper()
	matched, others, err := find(ctx, db, args.Kind(), m)
	if err != nil {
		tb.Fatalf("pgqueuetest: %v", err)
	}
	if len(matched) != n {
		tb.Fatalf("pgqueuetest: %d jobs of kind %q match %s, want %d%s", len(matched), args.Kind(), m.describe(), n, explain(others))
	}
	return matched
}

// RequireNotEnqueued fails the test if a job of args' kind matches m.
func RequireNotEnqueued(ctx context.Context, tb testing.TB, db DB, args pgqueue.JobArgs, m *Match) {
	tb.Helper()
	matched, _, err := find(ctx, db, args.Kind(), m)
	if err != nil {
		tb.Fatalf("pgqueuetest: %v", err)
	}
	if len(matched) > 0 {
		tb.Fatalf("pgqueuetest: %d jobs of kind %q match %s, want none (first: job %d, args %s)",
			len(matched), args.Kind(), m.describe(), matched[0].ID, matched[0].EncodedArgs)
	}
}

// mismatch is a job of the kind that did not match, and why.
type mismatch struct {
	job    *Enqueued
	reason string
}

// find reads the jobs of kind and splits them by m.
func find(ctx context.Context, db DB, kind string, m *Match) (matched []*Enqueued, others []mismatch, err error) {
	if m == nil {
		m = &Match{}
	}
	schema := m.Schema
	if schema == "" {
		schema = pgqueue.SchemaDefault
	}
	if err := sqlschema.Validate(schema); err != nil {
		return nil, nil, err
	}
	var contain any
	if m.Args != nil {
		b, err := json.Marshal(m.Args)
		if err != nil {
			return nil, nil, fmt.Errorf("encode Match.Args: %w", err)
		}
		contain = string(b)
	}
	b, err := sqlFiles.ReadFile("sql/enqueued.sql")
	if err != nil {
		return nil, nil, err
	}
	rows, err := db.Query(ctx, sqlschema.Fill(string(b), schema), kind, contain)
	if err != nil {
		return nil, nil, fmt.Errorf("read jobs of kind %q: %w", kind, err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Enqueued, error) {
		j := &Enqueued{JobRow: &pgqueue.JobRow{}}
		var state string
		err := row.Scan(&j.ID, &j.Queue, &j.Kind, &j.EncodedArgs, &j.Priority, &state, &j.Attempt, &j.MaxAttempts,
			&j.RunAt, &j.Tags, &j.Meta, &j.CreatedAt, &j.SingletonKey, &j.Unique)
		j.State = pgqueue.JobState(state)
		return j, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read jobs of kind %q: %w", kind, err)
	}
	for _, j := range all {
		if reason := m.mismatch(j); reason != "" {
			others = append(others, mismatch{j, reason})
		} else {
			matched = append(matched, j)
		}
	}
	return matched, others, nil
}

// mismatch says why j does not match m, or "" when it does.
func (m *Match) mismatch(j *Enqueued) string {
	within := m.ScheduledWithin
	if within == 0 {
		within = time.Second
	}
	switch {
	case m.Queue != "" && j.Queue != m.Queue:
		return fmt.Sprintf("queue %q", j.Queue)
	case m.Priority != nil && j.Priority != *m.Priority:
		return fmt.Sprintf("priority %d", j.Priority)
	case !m.ScheduledAt.IsZero() && (j.RunAt.Sub(m.ScheduledAt) > within || m.ScheduledAt.Sub(j.RunAt) > within):
		return fmt.Sprintf("scheduled at %s", j.RunAt.Format(time.RFC3339Nano))
	case m.MaxAttempts != 0 && j.MaxAttempts != m.MaxAttempts:
		return fmt.Sprintf("max attempts %d", j.MaxAttempts)
	case m.Unique != nil && j.Unique != *m.Unique:
		return fmt.Sprintf("unique %t", j.Unique)
	case m.SingletonKey != "" && j.SingletonKey != m.SingletonKey:
		return fmt.Sprintf("singleton key %q", j.SingletonKey)
	case m.State != "" && j.State != m.State:
		return fmt.Sprintf("state %s", j.State)
	}
	for _, t := range m.Tags {
		if !slices.Contains(j.Tags, t) {
			return fmt.Sprintf("tags %q", j.Tags)
		}
	}
	return ""
}

// describe writes m for a failure message.
func (m *Match) describe() string {
	if m == nil {
		return "{}"
	}
	var parts []string
	add := func(format string, v any) { parts = append(parts, fmt.Sprintf(format, v)) }
	if m.Args != nil {
		b, _ := json.Marshal(m.Args)
		add("args ⊇ %s", string(b))
	}
	if m.Queue != "" {
		add("queue %q", m.Queue)
	}
	if m.Priority != nil {
		add("priority %d", *m.Priority)
	}
	if !m.ScheduledAt.IsZero() {
		add("scheduled at %s", m.ScheduledAt.Format(time.RFC3339Nano))
	}
	if m.MaxAttempts != 0 {
		add("max attempts %d", m.MaxAttempts)
	}
	if len(m.Tags) > 0 {
		add("tags %q", m.Tags)
	}
	if m.Unique != nil {
		add("unique %t", *m.Unique)
	}
	if m.SingletonKey != "" {
		add("singleton key %q", m.SingletonKey)
	}
	if m.State != "" {
		add("state %s", m.State)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// explain lists, for a failure message, the jobs of the kind (with
// matching args) that other options excluded.
func explain(others []mismatch) string {
	if len(others) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("; not matching:")
	for i, o := range others {
		if i == 5 {
			fmt.Fprintf(&b, "\n\t... and %d more", len(others)-i)
			break
		}
		fmt.Fprintf(&b, "\n\tjob %d (%s), args %s", o.job.ID, o.reason, o.job.EncodedArgs)
	}
	return b.String()
}
