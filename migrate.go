package pgqueue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue/internal/jobsql"
	"github.com/pgqueue/pgqueue/internal/pgsession"
	"github.com/pgqueue/pgqueue/internal/sqlschema"
	"github.com/pgqueue/pgqueue/migrations"
)

// MigrateResult says what a migration run did. A run that had nothing to do
// is a result with From == To, not an error.
type MigrateResult struct {
	// From is the schema version before the run; 0 means none applied.
	From uint
	// To is the schema version after the run; 0 means none applied.
	To uint
}

// Changed reports whether the run applied or reverted anything.
func (r MigrateResult) Changed() bool { return r.From != r.To }

// Migrator applies pgqueue's migrations to one schema through
// golang-migrate. Concurrent migrators on the same database and schema
// serialise on golang-migrate's advisory lock, so each migration is applied
// once.
type Migrator struct {
	m      *migrate.Migrate
	db     *sql.DB
	pool   *pgxpool.Pool
	q      *jobsql.Queries
	schema string
}

// NewMigrator prepares migrations for schema (SchemaDefault unless you chose another) on
// pool, creating the schema and its migrations table when missing. Close it
// when done; the pool stays open. A pool that goes through a connection
// pooler gets ErrMigrateThroughPooler.
func NewMigrator(ctx context.Context, pool *pgxpool.Pool, schema string) (*Migrator, error) {
	if pool == nil {
		return nil, errNilPool
	}
	q, err := jobsql.Load(schema) // validates the schema
	if err != nil {
		return nil, err
	}
	current, err := readSchemaVersion(ctx, pool, schema)
	if err != nil {
		return nil, err
	}
	// golang-migrate takes a session advisory lock as soon as it opens,
	// and so do migrations: through a pooler it would stay on a backend.
	if err := checkDirect(ctx, pool); err != nil {
		return nil, err
	}
	if !current.Migrated { // CREATE SCHEMA needs a privilege an application role lacks
		if err := createSchema(ctx, pool, q, schema); err != nil {
			return nil, err
		}
	}
	src, err := newSchemaSource(schema)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	driver, err := migratepgx.WithInstance(db, &migratepgx.Config{
		// Quoted and schema-qualified, so each schema has its own version
		// table and its own golang-migrate lock.
		MigrationsTable:       pgx.Identifier{schema, "schema_migrations"}.Sanitize(),
		MigrationsTableQuoted: true,
		SchemaName:            schema,
	})
	if err != nil {
		_ = db.Close()
		return nil, dbError("migrate: open", err)
	}
	m, err := migrate.NewWithInstance("pgqueue", src, "pgx", driver)
	if err != nil {
		_ = driver.Close()
		return nil, fmt.Errorf("pgqueue: migrate: %w", err)
	}
	return &Migrator{m: m, db: db, pool: pool, q: q, schema: schema}, nil
}

// checkDirect returns ErrMigrateThroughPooler when pool's connections go
// through a pooler.
func checkDirect(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return dbError("migrate: connect", err)
	}
	defer conn.Release()
	err = pgsession.Check(ctx, conn.Conn())
	if errors.Is(err, pgsession.ErrPooled) {
		return fmt.Errorf("%w: %w", ErrMigrateThroughPooler, err)
	}
	return dbError("migrate: check connection", err)
}

// createSchema creates the schema under a transaction-scoped advisory lock:
// concurrent CREATE SCHEMA IF NOT EXISTS can otherwise fail with a unique
// violation.
func createSchema(ctx context.Context, pool *pgxpool.Pool, q *jobsql.Queries, schema string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return dbError("migrate: create schema", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, q.CreateSchemaLock, schema); err != nil {
		return dbError("migrate: create schema", err)
	}
	if _, err := tx.Exec(ctx, q.CreateSchema); err != nil {
		return dbError("migrate: create schema", err)
	}
	return dbError("migrate: create schema", tx.Commit(ctx))
}

// Close releases the migrator's connection.
func (mg *Migrator) Close() error {
	srcErr, dbErr := mg.m.Close()
	return errors.Join(srcErr, dbErr)
}

// Up applies every migration not yet applied.
func (mg *Migrator) Up(ctx context.Context) (MigrateResult, error) {
	return mg.run(ctx, "up", mg.m.Up)
}

// Down reverts the last steps migrations; steps ≤ 0 reverts them all.
func (mg *Migrator) Down(ctx context.Context, steps int) (MigrateResult, error) {
	if steps <= 0 {
		return mg.run(ctx, "down", mg.m.Down)
	}
	return mg.run(ctx, "down", func() error { return mg.m.Steps(-steps) })
}

// Version returns the applied version (0 when none) and whether the last
// migration failed half-way (dirty: fix the database, then Force).
func (mg *Migrator) Version(ctx context.Context) (version uint, dirty bool, err error) {
	if err := ctxError(ctx, "migrate version"); err != nil {
		return 0, false, err
	}
	v, dirty, err := mg.m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("pgqueue: migrate version: %w", err)
	}
	return v, dirty, nil
}

// Force sets the recorded version without running migrations and clears
// the dirty flag; -1 records none.
func (mg *Migrator) Force(ctx context.Context, version int) error {
	if err := ctxError(ctx, "migrate force"); err != nil {
		return err
	}
	if err := mg.m.Force(version); err != nil {
		return fmt.Errorf("pgqueue: migrate force %d: %w", version, err)
	}
	return nil
}

func (mg *Migrator) run(ctx context.Context, op string, step func() error) (_ MigrateResult, err error) {
	// golang-migrate locks only around its own step; concurrent runs would
	// all read the same From. This lock, on a connection held for the run,
	// makes From and To this run's own.
	conn, err := mg.pool.Acquire(ctx)
	if err != nil {
		return MigrateResult{}, dbError("migrate "+op, err)
	}
	if _, err := conn.Exec(ctx, mg.q.MigrateLock, mg.schema); err != nil {
		conn.Release()
		return MigrateResult{}, dbError("migrate "+op+": lock", err)
	}
	defer func() {
		var unlocked bool
		uerr := conn.QueryRow(context.WithoutCancel(ctx), mg.q.MigrateUnlock, mg.schema).Scan(&unlocked)
		if uerr != nil || !unlocked {
			// Closing the session is the sure way to drop its lock.
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
		conn.Release()
	}()
	from, _, err := mg.Version(ctx)
	if err != nil {
		return MigrateResult{}, err
	}
	// golang-migrate takes no context; its GracefulStop ends the run
	// between migrations when ctx is cancelled.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			select {
			case mg.m.GracefulStop <- true:
			default:
			}
		case <-done:
		}
	}()
	err = step()
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		if errors.Is(err, os.ErrNotExist) {
			return MigrateResult{}, fmt.Errorf("pgqueue: migrate %s: no such migration: %w", op, err)
		}
		return MigrateResult{}, fmt.Errorf("pgqueue: migrate %s: %w", op, err)
	}
	to, _, err := mg.Version(ctx)
	if err != nil {
		return MigrateResult{}, err
	}
	return MigrateResult{From: from, To: to}, ctxError(ctx, "migrate "+op)
}

// Migrate applies every pending migration to schema (pass SchemaDefault
// unless Config.Schema names another): the one call most programs need at
// start-up. An empty schema is refused (ErrInvalid).
//
// When the schema is at this version already, Migrate only reads its
// version table: an application role that holds just the grants of
// GrantsSQL can call it at every start, through a pooler too. Behind a
// pooler, a pool in an exec mode that cannot work there gets
// ErrPoolerExecMode before any other statement, as from Client.Start.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) (MigrateResult, error) {
	if pool == nil {
		return MigrateResult{}, errNilPool
	}
	if err := sqlschema.Validate(schema); err != nil {
		return MigrateResult{}, err
	}
	// Before the version is read in the pool's mode (see checkPool).
	if _, err := checkPoolExecMode(ctx, pool, "migrate"); err != nil {
		return MigrateResult{}, err
	}
	if v, ok, err := schemaCurrent(ctx, pool, schema); err != nil || ok {
		return MigrateResult{From: v, To: v}, err
	}
	mg, err := NewMigrator(ctx, pool, schema)
	if err != nil {
		return MigrateResult{}, err
	}
	defer mg.Close()
	return mg.Up(ctx)
}

// schemaSource is golang-migrate's iofs source over migrations.FS with the
// schema placeholder filled in as files are read.
type schemaSource struct {
	source.Driver
	schema string
}

func newSchemaSource(schema string) (source.Driver, error) {
	inner, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, fmt.Errorf("pgqueue: migrate: read migrations: %w", err)
	}
	return &schemaSource{Driver: inner, schema: schema}, nil
}

func (s *schemaSource) ReadUp(version uint) (io.ReadCloser, string, error) {
	return s.fill(s.Driver.ReadUp(version))
}

func (s *schemaSource) ReadDown(version uint) (io.ReadCloser, string, error) {
	return s.fill(s.Driver.ReadDown(version))
}

func (s *schemaSource) fill(r io.ReadCloser, id string, err error) (io.ReadCloser, string, error) {
	if err != nil {
		return nil, id, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, id, err
	}
	sql := sqlschema.Fill(string(b), s.schema)
	// The channel is made of the validated schema name: letters, digits and
	// '_' only, safe inside a string literal.
	sql = strings.ReplaceAll(sql, migrations.ChannelPlaceholder, jobsql.NotifyChannel(s.schema))
	return io.NopCloser(strings.NewReader(sql)), id, nil
}
