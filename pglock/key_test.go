package pglock_test

import (
	"errors"
	"hash/fnv"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pglock"
)

func TestLockKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newPool(t)
	if _, err := pgqueue.Migrate(ctx, pool, "other"); err != nil {
		t.Fatal(err)
	}
	def := newLocker(t, pool, nil)
	other := newLocker(t, pool, &pglock.Config{Schema: "other"})

	t.Run("DerivedAsDocumented", func(t *testing.T) {
		fnv32a := func(s string) int32 {
			h := fnv.New32a()
			_, _ = h.Write([]byte(s))
			return int32(h.Sum32())
		}
		for _, tc := range []struct {
			lk     *pglock.Locker
			schema string
		}{{def, "pgqueue"}, {other, "other"}} {
			if got := tc.lk.Schema(); got != tc.schema {
				t.Errorf("Schema() = %q, want %q", got, tc.schema)
			}
			k := tc.lk.Key("nightly")
			want := pglock.Key{Class: fnv32a("pgqueue:" + tc.schema), Object: fnv32a("nightly")}
			if k != want {
				t.Errorf("schema %s: Key(nightly) = %+v, want %+v", tc.schema, k, want)
			}
		}
		ka, kb := def.Key("nightly"), other.Key("nightly")
		if ka == kb || ka.Class == kb.Class {
			t.Fatalf("schemas pgqueue and other share key %+v / %+v", ka, kb)
		}
		if def.Key("nightly") == def.Key("weekly") {
			t.Fatal("two names share a key")
		}
	})

	t.Run("SchemasDoNotExcludeEachOther", func(t *testing.T) {
		txA, txB := begin(t, pool), begin(t, pool)
		if _, err := def.TryLockXact(ctx, txA, "nightly"); err != nil {
			t.Fatal(err)
		}
		if _, err := other.TryLockXact(ctx, txB, "nightly"); err != nil {
			t.Fatalf("schema other's lock of the name schema pgqueue holds: %v", err)
		}
		// Within one schema the name is exclusive.
		txC := begin(t, pool)
		if _, err := def.TryLockXact(ctx, txC, "nightly"); !errors.Is(err, pglock.ErrBusy) {
			t.Fatalf("same schema, same name: %v, want ErrBusy", err)
		}
	})

	t.Run("SeparateFromBigintKeySpace", func(t *testing.T) {
		k := def.Key("nightly")
		tx := begin(t, pool)
		if _, err := def.TryLockXact(ctx, tx, "nightly"); err != nil {
			t.Fatal(err)
		}
		conn, err := pool.Acquire(ctx)
		must(t, err)
		defer conn.Release()
		var got bool
		must(t, conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::bigint)", k.Int64()).Scan(&got))
		if !got {
			t.Fatal("a bigint advisory lock on Key.Int64() is blocked by pglock's lock")
		}
		// Int64 is where pg_locks shows the key: the bigint form's classid
		// and objid are its high and low halves (objsubid 1), the same
		// columns that show the two-int4 form (objsubid 2).
		rows, err := pool.Query(ctx, `
			SELECT objsubid, (classid::bigint << 32) | objid::bigint
			FROM pg_locks
			WHERE locktype = 'advisory' AND granted
			  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			ORDER BY objsubid`)
		must(t, err)
		type lock struct {
			Sub int16
			Key int64
		}
		locks, err := pgx.CollectRows(rows, pgx.RowToStructByPos[lock])
		must(t, err)
		want := []lock{{1, k.Int64()}, {2, k.Int64()}}
		if !slices.Equal(locks, want) {
			t.Fatalf("pg_locks %+v, want %+v", locks, want)
		}
		var unlocked bool
		must(t, conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1::bigint)", k.Int64()).Scan(&unlocked))
		if !unlocked {
			t.Fatal("bigint unlock failed")
		}
		// And the other way round: a bigint holder does not block pglock.
		must(t, conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::bigint)", other.Key("weekly").Int64()).Scan(&got))
		if !got {
			t.Fatal("bigint lock failed")
		}
		tx2 := begin(t, pool)
		if _, err := other.TryLockXact(ctx, tx2, "weekly"); err != nil {
			t.Fatalf("pglock lock beside a bigint lock on the same number: %v", err)
		}
		_, err = conn.Exec(ctx, "SELECT pg_advisory_unlock_all()")
		must(t, err)
	})
}
