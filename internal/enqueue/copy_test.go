package enqueue

import (
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue/internal/jobsql"
)

// What a tracer is told of a COPY names the columns of its statement.
func TestCopyColumnsMatchStatements(t *testing.T) {
	q, err := jobsql.Load("pgqueue")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sql   string
		later bool
	}{{q.CopyJobs, false}, {q.CopyJobsScheduled, true}} {
		want := ".jobs (" + strings.Join(copyColumnNames(c.later), ", ") + ") FROM STDIN"
		if !strings.Contains(c.sql, want) {
			t.Errorf("statement %q does not copy into %q", c.sql, want)
		}
	}
}
