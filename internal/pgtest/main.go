package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

const (
	// startTimeout bounds obtaining the server and building the template; a
	// first container run may have to pull the image.
	startTimeout = 5 * time.Minute
	// cleanupTimeout bounds dropping the template and stopping the server.
	cleanupTimeout = time.Minute
)

// shared is the state Main sets up for DB and Shared.
var shared struct {
	mu       sync.Mutex
	server   *Server
	template *Template
}

// Main runs a test binary's tests against a real server, for TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, migrate)) }
//
// It starts a server (see Start), builds the template with setup, makes
// both available through DB and Shared, runs the tests, then drops the
// template and closes the server. It runs as many tests at once as the
// connection budget holds (see setParallel). It returns the exit code for os.Exit; if
// no server can be had it prints why, and how to provide one, to stderr and
// returns 1.
func Main(m *testing.M, setup func(ctx context.Context, connString string) error) int {
	if err := setParallel(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	srv, err := Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tmpl, err := NewTemplate(ctx, srv, setup)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if err := srv.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	}
	setShared(srv, tmpl)

	code := m.Run()

	setShared(nil, nil)
	ctx, cancel = context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := errors.Join(tmpl.Close(ctx), srv.Close()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// DB returns the template Main built, for tests to call NewDatabase on. It
// panics if Main is not running this test binary.
func DB() *Template {
	recordEnv() // for the test cache: see recordEnv
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.template == nil {
		panic("pgtest: DB called outside pgtest.Main; add func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, setup)) } to the package's tests")
	}
	return shared.template
}

// Shared returns the server Main started. It panics if Main is not running
// this test binary.
func Shared() *Server {
	recordEnv() // for the test cache: see recordEnv
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil {
		panic("pgtest: Shared called outside pgtest.Main; add func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, setup)) } to the package's tests")
	}
	return shared.server
}

func setShared(s *Server, t *Template) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.server, shared.template = s, t
}
