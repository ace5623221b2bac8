package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// exitNotFound is the exit code of a command that named a job that does
// not exist, so scripts can tell "no such job" from a failure.
const exitNotFound = 3

// readFlags are the flags of every command that only reads.
type readFlags struct {
	dbFlags
	json bool
}

func (f *readFlags) register(fs *flag.FlagSet) {
	f.dbFlags.register(fs, pgqueue.SchemaDefault)
	fs.BoolVar(&f.json, "json", false, "")
}

// check checks the database flags.
func (f *dbFlags) check() error {
	if err := f.checkSchema(); err != nil {
		return err
	}
	if f.databaseURL == "" {
		return usagef("no database: set --database-url or DATABASE_URL")
	}
	return nil
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() { _ = t.tw.Flush() }

// age renders a duration for a human, to a tenth of a second; "-" for
// none.
func age(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(100 * time.Millisecond).String()
}

// when renders a time, "-" for zero.
func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// truncate shortens s to n runes on one line.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// listFlag is a flag that may be repeated and takes comma-separated
// values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// timeFlag is a point in time given as RFC 3339 or as a duration ago
// ("90m" means 90 minutes ago).
type timeFlag struct{ t time.Time }

func (f *timeFlag) String() string {
	if f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		f.t = time.Now().Add(-d)
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("want RFC 3339 (2006-01-02T15:04:05Z) or a duration ago (90m), got %q", s)
	}
	f.t = t
	return nil
}

// connect opens a pool on the flags' database and a client on it that
// works no queue: New touches nothing, and every call made with it is
// the command's own.
func (f *dbFlags) connect(ctx context.Context) (*pgxpool.Pool, *pgqueue.Client, error) {
	pool, err := openPool(ctx, f.databaseURL)
	if err != nil {
		return nil, nil, err
	}
	client, err := pgqueue.New(pool, &pgqueue.Config{Schema: f.schema})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return pool, client, nil
}
