package pgqueue

import (
	"embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/migrations"
)

//go:embed sql/*.sql
var sqlFiles embed.FS

// DefaultSchema is the schema pgqueue's tables live in unless Config.Schema
// says otherwise.
const DefaultSchema = "pgqueue"

// SchemaPattern is what a schema name must match: a lower-case SQL
// identifier of at most 63 bytes. It is quoted wherever it is used.
var SchemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// oneShotPlan, passed first among a statement's arguments, has PostgreSQL
// plan it for the arrays it is given, every time. Statements joining
// unnest($arrays) with jobs need that: a cached generic plan does not know
// the arrays' length, and was seen to rescan them once per running row,
// two seconds for one batch of 2,000 results.
const oneShotPlan = pgx.QueryExecModeCacheDescribe

// queries holds every statement of sql/, with the schema filled in once.
type queries struct {
	claim, insert, insertMany, complete, completeMany, finish, schedule string
	notify, notifyQueues, notifyDue, poll                               string
	heartbeat, rescueCandidates, rescue, jobOutcomes, checkFence        string
}

func validateSchema(schema string) error {
	if !SchemaPattern.MatchString(schema) {
		return fmt.Errorf("%w: %q does not match %s", ErrInvalidSchema, schema, SchemaPattern)
	}
	return nil
}

// quoteSchema returns the schema as a quoted identifier.
func quoteSchema(schema string) string {
	return pgx.Identifier{schema}.Sanitize()
}

func loadQueries(schema string) (*queries, error) {
	if err := validateSchema(schema); err != nil {
		return nil, err
	}
	quoted := quoteSchema(schema)
	q := &queries{}
	for name, dst := range map[string]*string{
		"claim": &q.claim, "insert": &q.insert, "insert_many": &q.insertMany, "notify_due": &q.notifyDue, "poll": &q.poll, "complete": &q.complete, "finish": &q.finish, "complete_many": &q.completeMany,
		"schedule": &q.schedule, "notify": &q.notify, "notify_queues": &q.notifyQueues,
		"heartbeat": &q.heartbeat, "rescue_candidates": &q.rescueCandidates, "rescue": &q.rescue,
		"job_outcomes": &q.jobOutcomes, "check_fence": &q.checkFence,
	} {
		b, err := sqlFiles.ReadFile("sql/" + name + ".sql")
		if err != nil {
			return nil, fmt.Errorf("pgqueue: load query %s: %w", name, err)
		}
		*dst = strings.ReplaceAll(string(b), migrations.SchemaPlaceholder, quoted)
	}
	return q, nil
}
