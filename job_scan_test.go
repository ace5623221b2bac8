package pgqueue_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/pgtest"
)

// jobValuesSQL returns rows with the columns of claim.sql's RETURNING
// list, ordinary ones and edge values, for comparing the claim's own
// decoding with pgx's scan.
const jobValuesSQL = `
SELECT id, queue, kind, args, priority::smallint, state, attempt, max_attempts, run_at, fence, lease_until,
       worker_id, errors, tags, meta, created_at, attempted_at, finalized_at, singleton_key,
       partition_key, sequence_key
FROM (VALUES
  (1::bigint, 'default'::text, 'note'::text, '{"n":1}'::jsonb, 0::smallint, 'running'::text, 1, 25,
   '2026-12-03 10:00:00.123456+00'::timestamptz, 10::bigint, '2026-12-03 10:30:00+00'::timestamptz,
   'client-a'::text, '[]'::jsonb, '{}'::text[], '{}'::jsonb, '2026-12-03 09:59:59.999999+00'::timestamptz,
   '2026-12-03 10:00:01+00'::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::text),
  (2, 'default', 'note', '{"n":2,"s":"é \" \\u0000x"}', -3, 'running', 7, 7,
   '1969-12-31 23:59:59.999999+00', 11, '1999-06-01 12:00:00.5+00',
   'client-a', '[{"attempt":1,"at":"2026-12-01T00:00:00Z","error":"boom","trace":"t"},{"attempt":2,"at":"2026-12-02T00:00:00Z","error":"x","unknown_kind":true}]',
   '{}', '{"m":[1,2,{"k":null}]}', '1970-01-01 00:00:00+00',
   '2000-01-01 00:00:00+00', '1901-01-01 00:00:00.000001+00', '', 'tenant-7', 'ключ 𝄞'),
  (3, 'other queue', 'kind.two', '[]', 32767, 'available', 0, 1,
   '2262-04-11 23:47:16.854775+00', NULL, NULL,
   NULL, '[]', '{}', '{"a":"b"}', '0044-03-15 12:00:00+00',
   NULL, NULL, 'singleton/key', 'p', NULL),
  (4, 'other queue', 'kind.two', '{}', -32768, 'completed', 2147483647, 2147483647,
   '2026-12-03 10:00:00+00', 9223372036854775807, 'infinity',
   'client-b', '[]', '{tag1,"tag two"}', '{}', '2026-12-03 10:00:00+00',
   '-infinity', '2026-12-03 10:00:00+00', NULL, 'p4', 's4'),
  (5, 'default', 'note', '{"n":5}', 1, 'running', 1, 25,
   '2026-12-03 10:00:00+00', 12, '2026-12-03 10:30:00+00',
   'client-a', '[]', '{}', '{}', '2026-12-03 10:00:00+00',
   '2026-12-03 10:00:01+00', NULL, NULL, NULL, 'order/5'),
  -- empty errors, tags and meta as the claims return them: NULL
  (6, 'default', 'note', '{"n":6}', 0, 'running', 1, 25,
   '2026-12-03 10:00:00+00', 13, '2026-12-03 10:30:00+00',
   'client-a', NULL, NULL, NULL, '2026-12-03 10:00:00+00',
   '2026-12-03 10:00:01+00', NULL, NULL, NULL, NULL)
) AS v(id, queue, kind, args, priority, state, attempt, max_attempts, run_at, fence, lease_until,
       worker_id, errors, tags, meta, created_at, attempted_at, finalized_at, singleton_key,
       partition_key, sequence_key)
ORDER BY id`

// TestClaimRowDecoding compares the claim's own decoding of job rows with
// pgx's scan, value for value, on ordinary rows and edge values, with pgx's
// default type map and with timestamps scanned in UTC; the rows it leaves
// to pgx (tags, infinite timestamps) must be those and only those.
func TestClaimRowDecoding(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, pool *pgxpool.Pool) {
		fast, generic, err := pgqueue.ScanJobRowsBothWays(ctx, pool, jobValuesSQL)
		if err != nil {
			t.Fatal(err)
		}
		if len(fast) != 6 {
			t.Fatalf("%d rows, want 6", len(fast))
		}
		// The keys, as both ways must read them.
		keys := map[int64][2]string{2: {"tenant-7", "ключ 𝄞"}, 3: {"p", ""}, 4: {"p4", "s4"}, 5: {"", "order/5"}}
		for i, f := range fast {
			id := generic[i].ID
			if g := generic[i]; [2]string{g.PartitionKey, g.SequenceKey} != keys[id] {
				t.Errorf("job %d: partition and sequence keys %q, %q, want %q", id, g.PartitionKey, g.SequenceKey, keys[id])
			}
			if leftToPgx := id == 4; (f == nil) != leftToPgx {
				t.Errorf("job %d: decoded itself %t, want %t", id, f != nil, !leftToPgx)
				continue
			}
			if f != nil && !reflect.DeepEqual(f, generic[i]) {
				t.Errorf("job %d:\n own %+v\n pgx %+v", id, *f, *generic[i])
			}
			// NULL reads as the column's empty value (the columns are NOT
			// NULL; the claims send NULL for empty ones).
			if g := generic[i]; id == 6 && (g.Errors != nil || g.Tags == nil || len(g.Tags) != 0 || string(g.Meta) != "{}") {
				t.Errorf("job 6 (NULL errors, tags, meta): errors %v, tags %#v, meta %q; want none, [], {}", g.Errors, g.Tags, g.Meta)
			}
		}
	}
	t.Run("DefaultTypeMap", func(t *testing.T) { check(t, newPool(t)) })
	t.Run("ScanLocationUTC", func(t *testing.T) {
		cfg, err := pgxpool.ParseConfig(pgtest.DB().NewDatabase(t))
		must(t, err)
		cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
			conn.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
				Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
			return nil
		}
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		must(t, err)
		t.Cleanup(pool.Close)
		check(t, pool)
	})
}
