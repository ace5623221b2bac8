package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueueui"
)

const uiUsage = `Usage: pgqueue ui [flags]

Serves the web dashboard (package pgqueueui): queues, jobs, locks and
periodic jobs, with retry, cancel, delete, pause and resume, until
interrupted. It has no authentication of its own: keep it on a loopback
address, or use --read-only, or mount pgqueueui.Handler in a service
behind your own authentication instead.

Flags:

	--listen ADDR       address to serve on (default "127.0.0.1:8080";
	                    port 0 picks a free one)
	--read-only         hide and refuse every action
	--prefix PATH       serve under PATH (such as /queue) instead of /
	--database-url URL  database (default: $DATABASE_URL)
	--schema NAME       schema of pgqueue's tables (default "pgqueue")
`

func runUI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return finish("ui", uiUsage, serveUI(ctx, args, stdout, stderr), stdout, stderr)
}

func serveUI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f dbFlags
	fs := newFlagSet("ui")
	f.register(fs, pgqueue.SchemaDefault)
	listen := fs.String("listen", "127.0.0.1:8080", "")
	readOnly := fs.Bool("read-only", false, "")
	prefix := fs.String("prefix", "", "")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("ui takes no arguments, got %q", pos)
	}
	if err := f.check(); err != nil {
		return err
	}
	pool, _, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	h, err := pgqueueui.New(pool, &pgqueueui.Options{Schema: f.schema, Prefix: *prefix, ReadOnly: *readOnly})
	if errors.Is(err, pgqueueui.ErrInvalidOptions) {
		return usagef("%v", err)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	addr := ln.Addr().(*net.TCPAddr)
	if !addr.IP.IsLoopback() {
		fmt.Fprintf(stderr, "pgqueue ui: warning: %s is not a loopback address and the dashboard has no authentication\n", addr)
	}
	mode := ""
	if *readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(stdout, "pgqueue ui: serving http://%s%s/%s\n", addr, *prefix, mode)

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Interrupted: let requests in flight finish, briefly.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
