package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

func TestDemo(t *testing.T) {
	t.Parallel()

	// newPool returns a pool on a fresh database, and its URL.
	newPool := func(t *testing.T) (*pgxpool.Pool, string) {
		t.Helper()
		url := pgtest.DB().NewDatabase(t)
		pool, err := pgxpool.New(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return pool, url
	}

	t.Run("WorksEveryJob", func(t *testing.T) {
		skipInShortMode(t, "the demo run whole, 500 jobs")
		t.Parallel()
		pool, url := newPool(t)
		// Left over from an earlier run: the demo must empty its table.
		if _, err := pgqueue.Migrate(t.Context(), pool, "pgqueue_demo"); err != nil {
			t.Fatal(err)
		}
		earlier, err := pgqueue.New(pool, &pgqueue.Config{Schema: "pgqueue_demo"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := earlier.Enqueue(t.Context(), demoJob{}, nil); err != nil {
			t.Fatal(err)
		}

		code, stdout, stderr := runCLI(t.Context(), "demo", "--jobs", "500", "--database-url", url)
		if code != exitOK {
			t.Fatalf("exit code %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
		}
		counts, err := countStates(t.Context(), pool, demoQueriesFor(t, "pgqueue_demo"))
		if err != nil {
			t.Fatal(err)
		}
		// Every hundredth job fails every time; every other one ends
		// completed.
		want := map[pgqueue.JobState]int64{pgqueue.StateCompleted: 495, pgqueue.StateDiscarded: 5}
		if !maps.Equal(counts, want) {
			t.Errorf("jobs by state %v, want %v", counts, want)
		}
		for _, line := range []string{"summary:", "completed  495", "retried    50", "discarded  5",
			`deleting 1 jobs left in "pgqueue_demo"."jobs" by an earlier demo run that did not finish`,
			// Every tenth job is scheduled ahead, apart from the throughput.
			"due at once: 450 jobs, finished ", "scheduled 1-5 s ahead: 50 jobs, the last finished ",
			// Each discarded job is a warning, counted, not printed.
			"library log: 5 records at warn level or above, in ",
			"       5  WARN  pgqueue: job failed; discarded"} {
			if !strings.Contains(stdout, line) {
				t.Errorf("output does not contain %q:\n%s", line, stdout)
			}
		}
		if stderr != "" {
			t.Errorf("stderr: %s", stderr)
		}
		// The progress table: nothing but progress lines between the
		// enqueue and the summary.
		table := stdout[strings.Index(stdout, "enqueued 500 jobs"):strings.Index(stdout, "summary:")]
		for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
			if !progressRow.MatchString(line) {
				t.Errorf("not a progress line: %q", line)
			}
		}
		// The log names the jobs by their database id, as the error does.
		logPath := regexp.MustCompile(`in (\S+\.log):`).FindStringSubmatch(stdout)
		if logPath == nil {
			t.Fatalf("no log file in:\n%s", stdout)
		}
		logged, err := os.ReadFile(logPath[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`job=(\d+) .*err="job (\d+) fails attempt 3, as planned"`).FindAllStringSubmatch(string(logged), -1) {
			if m[1] != m[2] {
				t.Errorf("log line names job %s, its error job %s", m[1], m[2])
			}
		}
		if n := strings.Count(string(logged), "as planned"); n != 5 {
			t.Errorf("%d failures in the log, want 5:\n%s", n, logged)
		}
	})

	t.Run("RefusesSchemaWithOtherJobs", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the demo refusing a schema that holds other jobs")
		pool, url := newPool(t)
		if _, err := pgqueue.Migrate(t.Context(), pool, pgqueue.SchemaDefault); err != nil {
			t.Fatal(err)
		}
		client, err := pgqueue.New(pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Enqueue(t.Context(), realJob{}, nil); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCLI(t.Context(), "demo", "--jobs", "10", "--schema", pgqueue.SchemaDefault, "--database-url", url)
		if code != exitError || !strings.Contains(stderr, "refusing to empty it") {
			t.Fatalf("exit code %d, want %d with a refusal\nstdout: %s\nstderr: %s", code, exitError, stdout, stderr)
		}
		var kinds []string
		rows, _ := pool.Query(t.Context(), "SELECT kind FROM pgqueue.jobs")
		for rows.Next() {
			var kind string
			if err := rows.Scan(&kind); err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, kind)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if len(kinds) != 1 || kinds[0] != (realJob{}).Kind() {
			t.Errorf("jobs after the refusal: %q, want only the real one", kinds)
		}
	})

	t.Run("TimesOut", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the demo's timeout")
		_, url := newPool(t)
		// Some jobs are scheduled a second or more ahead: 500 ms is too
		// short for them.
		code, stdout, stderr := runCLI(t.Context(), "demo", "--jobs", "100", "--timeout", "500ms", "--database-url", url)
		if code != exitError || !strings.Contains(stderr, "timed out") {
			t.Fatalf("exit code %d, want %d with a timeout\nstdout: %s\nstderr: %s", code, exitError, stdout, stderr)
		}
	})

	t.Run("HandsJobsBackWhenInterrupted", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "the demo interrupted handing its jobs back")
		pool, url := newPool(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// Interrupted once the jobs are in and being worked.
		stdout := &cancelOnOutput{want: "running", cancel: cancel}
		var stderr bytes.Buffer
		code := run(ctx, []string{"demo", "--jobs", "500", "--database-url", url}, stdout, &stderr)
		if code != exitError || !strings.Contains(stderr.String(), "interrupted") {
			t.Fatalf("exit code %d, want %d after an interrupt\nstdout: %s\nstderr: %s", code, exitError, stdout, &stderr)
		}
		counts, err := countStates(t.Context(), pool, demoQueriesFor(t, "pgqueue_demo"))
		if err != nil {
			t.Fatal(err)
		}
		if n := counts[pgqueue.StateRunning]; n != 0 {
			t.Errorf("%d jobs still running after the demo ended, want 0: %v", n, counts)
		}
	})
}

// progressRow is a line of the demo's progress table.
var progressRow = regexp.MustCompile(`^ *\d+\.\ds  scheduled +\d+  available +\d+  running +\d+  completed +\d+  discarded +\d+$`)

// cancelOnOutput collects output and calls cancel once it contains want.
type cancelOnOutput struct {
	bytes.Buffer
	want   string
	cancel context.CancelFunc
}

func (w *cancelOnOutput) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.cancel()
	}
	return n, err
}

// realJob stands for a job of the application, which the demo must not
// delete.
type realJob struct{}

func (realJob) Kind() string { return "send_invoice" }

// demoQueriesFor returns the demo's statements for schema.
func demoQueriesFor(t *testing.T, schema string) *demoQueries {
	t.Helper()
	q, err := loadDemoQueries(schema)
	if err != nil {
		t.Fatal(err)
	}
	return q
}
