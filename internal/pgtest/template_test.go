package pgtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestNewDatabase(t *testing.T) {
	t.Parallel()

	t.Run("ParallelTestsGetOwnDatabases", func(t *testing.T) {
		t.Parallel()
		// If the two shared a database, the later one would see the earlier
		// one's row, or fail once the earlier one's cleanup dropped it.
		var names [2]string
		t.Run("group", func(t *testing.T) {
			for i := range names {
				t.Run(fmt.Sprint("test", i), func(t *testing.T) {
					t.Parallel()
					conn := connect(t, DB().NewDatabase(t))
					if err := conn.QueryRow(t.Context(), `SELECT current_database()`).Scan(&names[i]); err != nil {
						t.Fatal(err)
					}
					if _, err := conn.Exec(t.Context(), `INSERT INTO items VALUES ($1, $2)`, i, names[i]); err != nil {
						t.Fatalf("insert into the template's table: %v", err)
					}
					var notes []string
					rows, _ := conn.Query(t.Context(), `SELECT note FROM items ORDER BY id`)
					for rows.Next() {
						var note string
						if err := rows.Scan(&note); err != nil {
							t.Fatal(err)
						}
						notes = append(notes, note)
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
					}
					if len(notes) != 1 || notes[0] != names[i] {
						t.Errorf("rows = %q, want only this test's row %q", notes, names[i])
					}
				})
			}
		})

		if names[0] == names[1] {
			t.Fatalf("both tests got database %q", names[0])
		}
		for _, name := range names {
			if !strings.HasPrefix(name, databasePrefix) {
				t.Errorf("database %q lacks prefix %q", name, databasePrefix)
			}
			// Dropped in the background once the test ended.
			deadline := time.Now().Add(dropTimeout)
			for admin := connect(t, Shared().AdminConnString()); databaseOn(t, admin, name); {
				if time.Now().After(deadline) {
					t.Fatalf("database %q still exists %s after its test ended", name, dropTimeout)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	})

	t.Run("WritesInvisibleInOtherDatabase", func(t *testing.T) {
		t.Parallel()
		a := connect(t, DB().NewDatabase(t))
		b := connect(t, DB().NewDatabase(t))
		if _, err := a.Exec(t.Context(), `INSERT INTO items VALUES (1, 'a')`); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := b.QueryRow(t.Context(), `SELECT count(*) FROM items`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("other database has %d rows, want 0", n)
		}
	})

	t.Run("ManyConcurrent", func(t *testing.T) {
		t.Parallel()
		for i := range 16 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				var n int
				conn := connect(t, DB().NewDatabase(t))
				if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM items`).Scan(&n); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
}

func TestNewTemplate(t *testing.T) {
	t.Parallel()

	t.Run("MarksTemplateAndCloseDrops", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a template marked as such and dropped on close")
		ctx := t.Context()
		tmpl, err := NewTemplate(ctx, Shared(), func(ctx context.Context, connString string) error {
			// Left open on purpose: NewTemplate must end it.
			_ = connect(t, connString)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var isTemplate, allowConn bool
		err = connect(t, Shared().AdminConnString()).QueryRow(ctx,
			`SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1`, tmpl.Name()).Scan(&isTemplate, &allowConn)
		if err != nil {
			t.Fatal(err)
		}
		if !isTemplate || allowConn {
			t.Errorf("datistemplate = %v, datallowconn = %v; want true, false", isTemplate, allowConn)
		}
		// Cloning works although setup's connection was left open.
		connect(t, tmpl.NewDatabase(t))

		if err := tmpl.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if databaseExists(t, tmpl.Name()) {
			t.Errorf("template %q still exists after Close", tmpl.Name())
		}
	})

	t.Run("CloseDropsEveryClone", func(t *testing.T) {
		t.Parallel()
		tmpl, err := NewTemplate(t.Context(), Shared(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("test", func(t *testing.T) { connect(t, tmpl.NewDatabase(t)) })
		made := func() []string {
			tmpl.h.madeMu.Lock()
			defer tmpl.h.madeMu.Unlock()
			return slices.Clone(tmpl.h.made)
		}
		for deadline := time.Now().Add(dropTimeout); len(made()) < 2; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no spare made in %s", dropTimeout)
			}
		}
		// Makers may be making more as Close stops them: those too must go.
		if err := tmpl.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		admin := connect(t, Shared().AdminConnString())
		for _, name := range made() {
			if databaseOn(t, admin, name) {
				t.Errorf("clone %q left after Close", name)
			}
		}
	})

	t.Run("SetupErrorDropsDatabase", func(t *testing.T) {
		t.Parallel()
		errSetup := errors.New("migration failed")
		var name string
		_, err := NewTemplate(t.Context(), Shared(), func(ctx context.Context, connString string) error {
			cfg, err := pgconn.ParseConfig(connString)
			if err != nil {
				return err
			}
			name = cfg.Database
			return errSetup
		})
		if !errors.Is(err, errSetup) {
			t.Fatalf("err = %v, want %v", err, errSetup)
		}
		if !strings.HasPrefix(name, templatePrefix) {
			t.Fatalf("setup got database %q, want prefix %q", name, templatePrefix)
		}
		if databaseExists(t, name) {
			t.Errorf("template %q left behind after failed setup", name)
		}
	})
}
