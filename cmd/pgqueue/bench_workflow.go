package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
)

// parseShapes reads --shape: a comma-separated list of workflow shapes,
// or "all".
func parseShapes(s string) ([]string, error) {
	if s == "all" {
		return bench.WorkflowShapes, nil
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if !slices.Contains(bench.WorkflowShapes, part) {
			return nil, usagef("--shape: %q is not one of %s or all", part, strings.Join(bench.WorkflowShapes, ", "))
		}
		out = append(out, part)
	}
	return out, nil
}

// warmUpJobs is the most jobs of each variant's untimed run before the
// rounds.
const warmUpJobs = 2000

// runWorkflowBench times --jobs independent jobs and a workflow of the
// same jobs in each shape, worked by one client of --workers workers,
// --rounds times, the order reversed every other round; it prints each
// shape's throughput against the independent jobs' and how long jobs
// waited between their last parent's completion and their start.
//
// Each variant first runs once untimed, with up to warmUpJobs jobs: the
// first runs of a process are slower (its pool's connections open, and
// the server's and the connections' caches and plans warm), and round
// 1's first variant, the independent jobs, ran 8-40% below its rate in
// later rounds, which raised every shape's ratio in that round.
func runWorkflowBench(ctx context.Context, a benchArgs, cfg *bench.Config, stdout io.Writer) error {
	variants := append([]string{"independent"}, a.shapes...)
	fmt.Fprintf(stdout, "workflow: %d jobs, %d workers; shapes %s against the same jobs without dependencies\n",
		a.jobs, a.workers, strings.Join(a.shapes, ", "))
	warm := *cfg
	warm.Jobs, warm.Progress = min(cfg.Jobs, warmUpJobs), nil
	fmt.Fprintf(stdout, "warm-up: %s, %d jobs each, not counted\n", strings.Join(variants, ", "), warm.Jobs)
	for _, v := range variants {
		if _, _, err := workflowVariant(ctx, &warm, v); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	rounds := make([]map[string]bench.Result, a.rounds)
	for r := range a.rounds {
		rounds[r] = map[string]bench.Result{}
		for _, v := range roundOrder(stdout, variants, r, a.rounds) {
			enq, res, err := workflowVariant(ctx, cfg, v)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, enq)
			fmt.Fprintln(stdout, res)
			printStatStatements(stdout, res)
			if v != "independent" {
				rel, err := bench.WorkflowRelease(ctx, cfg)
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout, "           "+rel.String())
			}
			rounds[r][v] = res
		}
	}
	fmt.Fprintf(stdout, "\n%-6s %-12s %10s %14s\n", "round", "variant", "jobs/s", "/independent")
	for r, runs := range rounds {
		base := runs["independent"].JobsPerSecond()
		for _, v := range variants {
			fmt.Fprintf(stdout, "%-6d %-12s %10.0f %14.2f\n", r+1, v, runs[v].JobsPerSecond(), runs[v].JobsPerSecond()/base)
		}
	}
	return nil
}

// workflowVariant empties the schema, enqueues cfg.Jobs jobs of variant v
// (independent jobs, or one workflow of a shape) and times working them.
func workflowVariant(ctx context.Context, cfg *bench.Config, v string) (enq, res bench.Result, err error) {
	if err := bench.Prepare(ctx, cfg); err != nil {
		return enq, res, err
	}
	if v == "independent" {
		enq, err = bench.Enqueue(ctx, cfg)
	} else {
		enq, err = bench.EnqueueWorkflow(ctx, cfg, v)
	}
	if err != nil {
		return enq, res, fmt.Errorf("%s: %w", v, err)
	}
	if res, err = bench.BurnDown(ctx, cfg); err != nil {
		return enq, res, fmt.Errorf("%s: %w", v, err)
	}
	res.Mode = v
	return enq, res, nil
}
