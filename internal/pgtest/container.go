package pgtest

import (
	"github.com/pgqueue/pgqueue/internal/pgserver"

	"context"
	"fmt"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/modules/postgres"
)

const containerImage = "postgres:16-alpine"

// pingDocker reports whether a Docker daemon answers. testcontainers
// panics in some lookups when no daemon is configured, so a panic counts as
// "no".
func pingDocker(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("docker client: %v", r)
		}
	}()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("ping docker: %w", err)
	}
	return nil
}

// startContainer runs the server in a container, with the same speed over
// durability settings as a local server.
func startContainer(ctx context.Context) (_ *Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pgtest: start container: %v", r)
		}
	}()
	cmd := []string{"postgres"}
	for _, s := range pgserver.DefaultSettings() {
		if s == "listen_addresses=127.0.0.1" {
			continue // inside the container the port is reached from outside
		}
		cmd = append(cmd, "-c", s)
	}
	for k, v := range sharedSettings {
		cmd = append(cmd, "-c", k+"="+v)
	}
	ctr, err := postgres.Run(ctx, containerImage,
		postgres.BasicWaitStrategies(),
		testcontainers.WithCmd(cmd...),
	)
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, fmt.Errorf("pgtest: start container: %w", err)
	}
	admin, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, fmt.Errorf("pgtest: container address: %w", err)
	}
	stop := func() error {
		if err := testcontainers.TerminateContainer(ctr); err != nil {
			return fmt.Errorf("pgtest: terminate container: %w", err)
		}
		return nil
	}
	return &Server{source: SourceTestcontainers, admin: admin, stop: stop}, nil
}
