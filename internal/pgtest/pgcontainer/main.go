// Command pgcontainer starts a throwaway PostgreSQL server in a Docker
// container through testcontainers-go, for the test harness
// (internal/pgtest), which runs it with `go run` in this directory when
// DATABASE_URL is unset and no local PostgreSQL binaries are found.
//
// It is a module of its own so that testcontainers-go and the Docker
// client stay out of pgqueue's go.mod, and so out of the go.sum of every
// program that imports pgqueue: a nested module is not part of its
// parent's module graph, nor of its module zip.
//
//	go run . -ping                      print "ok" when Docker answers, else
//	                                    "no " and why
//	go run . [-image I] [setting ...]   start the server with each setting
//	                                    (name=value) as postgres -c
//
// Started, it prints one line, "dsn <connection string>" (database
// postgres, superuser), and keeps the container until its standard input
// ends (the harness closes it, or dies) or it gets SIGINT or SIGTERM; it
// then removes the container and exits. Ryuk, testcontainers' reaper,
// removes it too should this program be killed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
)

// errNoDocker marks the failures that mean Docker is not there.
var errNoDocker = errors.New("docker does not answer")

func main() {
	ping := flag.Bool("ping", false, "only check that Docker answers")
	pingTimeout := flag.Duration("ping-timeout", 3*time.Second, "how long to wait for Docker's answer")
	image := flag.String("image", "postgres:16-alpine", "the server's image")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := pingDocker(ctx, *pingTimeout)
	if *ping {
		// The answer goes to stdout with status 0: go run turns every
		// failing status into 1, which then means the program did not run.
		if err != nil {
			fmt.Println("no", strings.TrimPrefix(err.Error(), errNoDocker.Error()+": "))
		} else {
			fmt.Println("ok")
		}
		return
	}
	if err == nil {
		err = serve(ctx, *image, flag.Args(), os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgcontainer:", err)
		os.Exit(1)
	}
}

// pingDocker reports whether a Docker daemon answers within timeout.
// testcontainers panics in some lookups when no daemon is configured, so
// a panic counts as "no".
func pingDocker(ctx context.Context, timeout time.Duration) (err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: docker client: %v", errNoDocker, r)
		}
	}()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoDocker, err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("%w: ping: %v", errNoDocker, err)
	}
	return nil
}

// serve starts the container, writes its connection string to out, and
// removes the container once in ends or ctx is cancelled.
func serve(ctx context.Context, image string, settings []string, in io.Reader, out io.Writer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("start container: %v", r)
		}
	}()
	cmd := []string{"postgres"}
	for _, s := range settings {
		cmd = append(cmd, "-c", s)
	}
	ctr, err := postgres.Run(ctx, image, postgres.BasicWaitStrategies(), testcontainers.WithCmd(cmd...))
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return fmt.Errorf("start container: %w", err)
	}
	defer func() {
		if terr := testcontainers.TerminateContainer(ctr); terr != nil && err == nil {
			err = fmt.Errorf("terminate container: %w", terr)
		}
	}()
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		return fmt.Errorf("container address: %w", err)
	}
	if _, err := fmt.Fprintf(out, "dsn %s\n", dsn); err != nil {
		return err
	}
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
	return nil
}
