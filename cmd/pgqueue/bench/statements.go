package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ServerStatement is what one statement (by name, as StatementCount names
// them) cost the server during a run, by pg_stat_statements: every call in
// the run's database, whichever connection made it.
type ServerStatement struct {
	Name        string
	Calls, Rows int64
	// Exec and Plan are the server's execution and planning time.
	Exec, Plan time.Duration
	// Shared buffers hit, read, dirtied and written, and WAL bytes.
	BlksHit, BlksRead, BlksDirtied, BlksWritten, WALBytes int64
}

// statStatements resets this database's pg_stat_statements at a run's
// start and reads them at its end (Config.StatStatements).
type statStatements struct {
	cfg *Config
}

// enableStatStatements creates the extension in cfg's database; the server
// must preload its library.
func enableStatStatements(ctx context.Context, cfg *Config) error {
	q, err := cfg.queries()
	if err != nil {
		return err
	}
	if _, err := cfg.Pool.Exec(ctx, q.statStatementsCreate); err != nil {
		return fmt.Errorf("pg_stat_statements (the server must have shared_preload_libraries=pg_stat_statements): %w", err)
	}
	return nil
}

func (s *statStatements) reset(ctx context.Context) error {
	q, err := s.cfg.queries()
	if err != nil {
		return err
	}
	if _, err := s.cfg.Pool.Exec(ctx, q.statStatementsReset); err != nil {
		return fmt.Errorf("reset pg_stat_statements: %w", err)
	}
	return nil
}

// read returns the statements since reset, by name, the costliest first.
func (s *statStatements) read(ctx context.Context) ([]ServerStatement, error) {
	q, err := s.cfg.queries()
	if err != nil {
		return nil, err
	}
	rows, err := s.cfg.Pool.Query(ctx, q.statStatements)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	defer rows.Close()
	by := map[string]*ServerStatement{}
	for rows.Next() {
		var (
			text       string
			exec, plan float64 // ms
			st         ServerStatement
		)
		if err := rows.Scan(&text, &st.Calls, &exec, &plan, &st.Rows, &st.BlksHit, &st.BlksRead, &st.BlksDirtied, &st.BlksWritten, &st.WALBytes); err != nil {
			return nil, err
		}
		name := statementName(text)
		t := by[name]
		if t == nil {
			t = &ServerStatement{Name: name}
			by[name] = t
		}
		t.Calls += st.Calls
		t.Rows += st.Rows
		t.Exec += time.Duration(exec * float64(time.Millisecond))
		t.Plan += time.Duration(plan * float64(time.Millisecond))
		t.BlksHit += st.BlksHit
		t.BlksRead += st.BlksRead
		t.BlksDirtied += st.BlksDirtied
		t.BlksWritten += st.BlksWritten
		t.WALBytes += st.WALBytes
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	out := make([]ServerStatement, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b ServerStatement) int {
		if c := (b.Exec + b.Plan) - (a.Exec + a.Plan); c != 0 {
			if c > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// StatStatementsReport is the run's statements by pg_stat_statements, per
// job: the costliest first, at most limit of them (0: all), then their sum.
func StatStatementsReport(stats []ServerStatement, jobs int64, limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pg_stat_statements, per job (all the database's statements since the run's start):\n")
	fmt.Fprintf(&b, "%-22s %9s %9s %10s %10s %9s %9s %9s %9s %9s\n", "statement", "calls", "rows/call", "exec µs/j", "plan µs/j", "hit/j", "read/j", "dirty/j", "write/j", "WAL B/j")
	var sum ServerStatement
	sum.Name = "all"
	line := func(s ServerStatement) {
		fmt.Fprintf(&b, "%-22s %9d %9.1f %10.2f %10.2f %9.2f %9.3f %9.3f %9.3f %9.0f\n", s.Name, s.Calls, avg(s.Rows, s.Calls),
			perJob(s.Exec, jobs), perJob(s.Plan, jobs), avg(s.BlksHit, jobs), avg(s.BlksRead, jobs),
			avg(s.BlksDirtied, jobs), avg(s.BlksWritten, jobs), avg(s.WALBytes, jobs))
	}
	for i, s := range stats {
		if limit <= 0 || i < limit {
			line(s)
		}
		sum.Calls += s.Calls
		sum.Rows += s.Rows
		sum.Exec += s.Exec
		sum.Plan += s.Plan
		sum.BlksHit += s.BlksHit
		sum.BlksRead += s.BlksRead
		sum.BlksDirtied += s.BlksDirtied
		sum.BlksWritten += s.BlksWritten
		sum.WALBytes += s.WALBytes
	}
	line(sum)
	return strings.TrimSuffix(b.String(), "\n")
}
