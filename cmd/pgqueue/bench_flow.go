package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/cmd/pgqueue/bench"
	"github.com/pgqueue/pgqueue/internal/limitspec"
)

// runFlow runs the limit and sequence modes: the limited run and, with
// --baseline, the same jobs without limits, --rounds times, the order
// reversed every other round, in child processes of this binary.
func runFlow(ctx context.Context, a benchArgs, cfg *bench.Config, connString string, stdout io.Writer) error {
	command, err := benchChildCommand(connString)
	if err != nil {
		return err
	}
	cfg.Processes, cfg.JobDuration, cfg.StopAfter = a.processes, a.jobDuration, a.duration
	if cfg.PoolConns == 0 {
		cfg.PoolConns = max(6, 16/a.processes)
	}
	type variant struct {
		name   string
		limits pgqueue.QueueLimits
	}
	variants := []variant{{"limited", a.limits}}
	if a.mode == "sequence" {
		cfg.Sequences = a.sequences
		variants = []variant{{"sequences", pgqueue.QueueLimits{}}}
		fmt.Fprintf(stdout, "sequence: %d sequences of %d jobs; %d processes x %d workers, jobs of %s; at most %s a run\n",
			a.sequences, a.perSequence, a.processes, a.workers, a.jobDuration, a.duration)
	} else {
		cfg.Keys = a.keys
		if a.baseline {
			variants = append(variants, variant{"baseline", pgqueue.QueueLimits{}})
		}
		keys := ""
		if a.keys > 0 {
			keys = fmt.Sprintf(" over %d partition keys", a.keys)
		}
		fmt.Fprintf(stdout, "limit: %s; %d jobs%s; %d processes x %d workers, jobs of %s; at most %s a run\n",
			describeLimits(a.limits), a.jobs, keys, a.processes, a.workers, a.jobDuration, a.duration)
	}
	rounds := make([]map[string]bench.FlowResult, a.rounds)
	for r := range a.rounds {
		rounds[r] = map[string]bench.FlowResult{}
		for _, v := range roundOrder(stdout, variants, r, a.rounds) {
			res, err := bench.Flow(ctx, cfg, v.limits, command)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			res.Result.Mode = v.name
			fmt.Fprintln(stdout, res.Enqueue)
			fmt.Fprintln(stdout, res.Result)
			fmt.Fprintln(stdout, "           "+res.Result.Usage.StatementsLine())
			fmt.Fprintln(stdout, res.Report())
			rounds[r][v.name] = res
		}
		if a.baseline {
			lim, base := rounds[r]["limited"].Result, rounds[r]["baseline"].Result
			fmt.Fprintf(stdout, "limited/baseline: %.2f jobs/s (by the database); client CPU per job %.2f, server %.2f\n",
				rounds[r]["limited"].JobsPerSecond()/rounds[r]["baseline"].JobsPerSecond(),
				ratio(lim.Usage.ClientCPU, lim.Jobs, base.Usage.ClientCPU, base.Jobs),
				ratio(lim.Usage.ServerCPU, lim.Jobs, base.Usage.ServerCPU, base.Jobs))
		}
	}
	if len(variants) < 2 && a.rounds < 2 {
		return nil
	}
	first := variants[0].name
	fmt.Fprintf(stdout, "\n%-6s %-10s %10s %8s %8s %12s %12s\n", "round", "variant", "jobs/s", "/ideal", "/first", "client µs/j", "server µs/j")
	for r, runs := range rounds {
		for _, v := range variants {
			x := runs[v.name]
			u := x.Result.Usage
			fmt.Fprintf(stdout, "%-6d %-10s %10.0f %8.2f %8.2f %12.1f %12.1f\n", r+1, v.name, x.JobsPerSecond(), x.Ratio(),
				x.JobsPerSecond()/runs[first].JobsPerSecond(), perJob(u.ClientCPU, x.Result.Jobs), perJob(u.ServerCPU, x.Result.Jobs))
		}
	}
	return nil
}

// describeLimits is the limits of a limit run, for its header.
func describeLimits(l pgqueue.QueueLimits) string {
	var parts []string
	if l.MaxRunning > 0 {
		parts = append(parts, fmt.Sprintf("max running %d", l.MaxRunning))
	}
	if l.MaxRunningPerKey > 0 {
		parts = append(parts, fmt.Sprintf("max running per key %d", l.MaxRunningPerKey))
	}
	if l.Rate.Limit > 0 {
		parts = append(parts, "rate "+limitspec.FormatRate(l.Rate.Limit, l.Rate.Period))
	}
	return strings.Join(parts, ", ")
}
