package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue/internal/pgserver"
)

// Sources a Server can come from, as reported by Server.Source.
const (
	// SourceDatabaseURL is the server the DATABASE_URL variable names.
	SourceDatabaseURL = "DATABASE_URL"
	// SourceLocal is a throwaway server run from local PostgreSQL binaries.
	SourceLocal = "local binaries"
	// SourceTestcontainers is a throwaway server in a Docker container.
	SourceTestcontainers = "testcontainers"
)

// sharedSettings are added for the server Start starts, which nobody
// crashes on purpose: commits need not even reach the kernel.
var sharedSettings = map[string]string{"synchronous_commit": "off"}

// dockerPingTimeout bounds the wait for Docker's answer, so that a
// machine without Docker falls through to the error quickly.
// dockerProbeTimeout bounds the whole check, which may first have to
// build the helper program (see pingDocker).
const (
	dockerPingTimeout  = 3 * time.Second
	dockerProbeTimeout = 2 * time.Minute
)

// ErrNoServer is returned by Start (wrapped, with instructions) when no
// PostgreSQL server can be obtained: DATABASE_URL is unset, no server
// binaries are installed and Docker does not answer.
var ErrNoServer = errors.New("pgtest: no PostgreSQL server for tests")

const noServerHelp = `provide one of:
  - DATABASE_URL=postgres://user@host:port/db?sslmode=disable, connecting as a role allowed to CREATE DATABASE;
  - PostgreSQL server binaries (initdb, postgres) on PATH, under "pg_config --bindir" or in /usr/lib/postgresql/*/bin (Debian/Ubuntu: apt-get install postgresql);
  - a running Docker daemon (in a checkout of pgqueue, internal/pgtest/pgcontainer starts postgres:16-alpine through testcontainers)`

// Server is a PostgreSQL server for tests.
type Server struct {
	source string
	admin  string
	stop   func() error // nil when Close has nothing to stop

	closeOnce sync.Once
	closeErr  error
}

// Start obtains a server, trying in order: the server DATABASE_URL names
// (used as an admin connection, it must be allowed to CREATE DATABASE), a
// throwaway server from local PostgreSQL binaries, a testcontainers
// container when Docker answers. It returns an error wrapping ErrNoServer
// when none is available. The caller must Close the server.
func Start(ctx context.Context) (*Server, error) {
	return systemProbe().start(ctx)
}

// AdminConnString returns a connection string for the maintenance
// database: DATABASE_URL itself, or database "postgres" as superuser on a
// server Start started.
func (s *Server) AdminConnString() string { return s.admin }

// ConnString returns AdminConnString with its database replaced by dbname.
func (s *Server) ConnString(dbname string) string {
	cs, err := withDatabase(s.admin, dbname)
	if err != nil {
		// Start checked that the admin string rewrites, so this cannot happen.
		panic(fmt.Sprintf("pgtest: rewrite connection string: %v", err))
	}
	return cs
}

// Source says where the server came from: SourceDatabaseURL, SourceLocal or
// SourceTestcontainers.
func (s *Server) Source() string { return s.source }

// Close stops and removes the server if Start started one; for
// DATABASE_URL it does nothing. Closing twice does nothing.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.closeErr = s.stop()
		}
	})
	return s.closeErr
}

// probe holds what Start consults, so that the choice can be tested
// without a real environment.
type probe struct {
	getenv       func(key string) string
	findBinaries func() (pgserver.Binaries, error)
	pingDocker   func(ctx context.Context) error
}

func systemProbe() probe {
	return probe{getenv: os.Getenv, findBinaries: pgserver.FindBinaries, pingDocker: pingDocker}
}

// plan is the source Start settled on.
type plan struct {
	source      string
	databaseURL string            // for SourceDatabaseURL
	bin         pgserver.Binaries // for SourceLocal
}

// choose picks the first available source. Docker is asked only when no
// binaries are found, and with a short timeout.
func (p probe) choose(ctx context.Context) (plan, error) {
	if u := p.getenv("DATABASE_URL"); u != "" {
		return plan{source: SourceDatabaseURL, databaseURL: u}, nil
	}
	bin, binErr := p.findBinaries()
	if binErr == nil {
		return plan{source: SourceLocal, bin: bin}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	dockerErr := p.pingDocker(ctx)
	if dockerErr == nil {
		return plan{source: SourceTestcontainers}, nil
	}
	return plan{}, fmt.Errorf("%w; %s\n(DATABASE_URL: not set; local binaries: %v; docker: %v)",
		ErrNoServer, noServerHelp, binErr, dockerErr)
}

func (p probe) start(ctx context.Context) (*Server, error) {
	pl, err := p.choose(ctx)
	if err != nil {
		return nil, err
	}
	switch pl.source {
	case SourceDatabaseURL:
		return startDatabaseURL(ctx, pl.databaseURL)
	case SourceLocal:
		l, err := pgserver.Start(ctx, pgserver.Options{Binaries: &pl.bin, Settings: sharedSettings, InMemory: true})
		if err != nil {
			return nil, fmt.Errorf("pgtest: start server from local binaries: %w", err)
		}
		return &Server{source: SourceLocal, admin: l.ConnString("postgres"), stop: l.Close}, nil
	default:
		return startContainer(ctx)
	}
}

// startDatabaseURL checks that the server answers and that the role may
// create databases, so a wrong DATABASE_URL fails once, clearly, rather
// than in every test.
func startDatabaseURL(ctx context.Context, connString string) (*Server, error) {
	if _, err := withDatabase(connString, "postgres"); err != nil {
		return nil, fmt.Errorf("pgtest: DATABASE_URL: %w", err)
	}
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("pgtest: DATABASE_URL: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var mayCreate bool
	err = conn.QueryRow(ctx,
		`SELECT rolsuper OR rolcreatedb FROM pg_roles WHERE rolname = current_user`).Scan(&mayCreate)
	if err != nil {
		return nil, fmt.Errorf("pgtest: DATABASE_URL: check role: %w", err)
	}
	if !mayCreate {
		return nil, errors.New("pgtest: DATABASE_URL: the role may not CREATE DATABASE; grant it CREATEDB or use a superuser")
	}
	return &Server{source: SourceDatabaseURL, admin: connString}, nil
}
