package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/pgqueue/pgqueue"
)

// The workflow shapes of EnqueueWorkflow.
var WorkflowShapes = []string{"fan-out", "fan-in", "layered", "chain"}

// workflowLayers is the layered shape's depth: each job depends on 3 jobs
// of the layer above.
const workflowLayers = 20

// WorkflowParams returns n no-op jobs on the bench queue making one
// workflow of shape: fan-out (one job, then n-1 depending on it), fan-in
// (n-1 jobs, then one depending on them all), layered (20 layers of n/20,
// each job depending on 3 of the layer above) or chain (each job after
// the one before).
func WorkflowParams(shape string, n int) ([]pgqueue.EnqueueManyParams, error) {
	params := make([]pgqueue.EnqueueManyParams, n)
	dep := func(i int, parents ...int) {
		opts := &pgqueue.EnqueueOpts{Queue: queue}
		for _, p := range parents {
			opts.DependsOn = append(opts.DependsOn, pgqueue.DependsOnIndex(p))
		}
		params[i] = pgqueue.EnqueueManyParams{Args: noopArgs{N: i}, Opts: opts}
	}
	switch shape {
	case "fan-out":
		dep(0)
		for i := 1; i < n; i++ {
			dep(i, 0)
		}
	case "fan-in":
		if n-1 > pgqueue.MaxJobDependencies {
			return nil, fmt.Errorf("fan-in of %d jobs: a job depends on at most %d", n, pgqueue.MaxJobDependencies)
		}
		parents := make([]int, n-1)
		for i := range n - 1 {
			dep(i)
			parents[i] = i
		}
		dep(n-1, parents...)
	case "layered":
		width := max(n/workflowLayers, 3)
		for i := range n {
			if i < width {
				dep(i)
				continue
			}
			above := (i/width - 1) * width
			dep(i, above+i%width, above+(i+1)%width, above+(i+2)%width)
		}
	case "chain":
		dep(0)
		for i := 1; i < n; i++ {
			dep(i, i-1)
		}
	default:
		return nil, fmt.Errorf("unknown workflow shape %q: want one of %v", shape, WorkflowShapes)
	}
	return params, nil
}

// EnqueueWorkflow inserts cfg.Jobs jobs making one workflow of shape, in
// one EnqueueMany, and reports the insert rate.
func EnqueueWorkflow(ctx context.Context, cfg *Config, shape string) (Result, error) {
	params, err := WorkflowParams(shape, cfg.Jobs)
	if err != nil {
		return Result{}, err
	}
	client, err := pgqueue.New(cfg.Pool, &pgqueue.Config{Schema: cfg.schema()})
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	res, err := client.EnqueueMany(ctx, params)
	out := Result{Mode: "enqueue", Elapsed: time.Since(start)}
	if err != nil {
		return out, err
	}
	out.Jobs = res.Enqueued
	// The edges too, not only the jobs: in service autovacuum would have
	// visited a table that just took 10,000 rows.
	q, err := cfg.queries()
	if err != nil {
		return out, err
	}
	if _, err := cfg.Pool.Exec(ctx, q.vacuumAnalyzeJobDeps); err != nil {
		return out, err
	}
	return out, settle(ctx, cfg)
}

// Release is how long the jobs of a workflow run waited between the
// completion of their last parent and their start, by the database.
type Release struct {
	Jobs          int64
	P50, P95, Max time.Duration
}

func (r Release) String() string {
	if r.Jobs == 0 {
		return "release: no job with parents"
	}
	return fmt.Sprintf("release (last parent completed → child started), %d jobs: p50 %s p95 %s max %s",
		r.Jobs, round(r.P50), round(r.P95), round(r.Max))
}

// WorkflowRelease reads the release times of the run's jobs with parents
// (sql/workflow_release.sql).
func WorkflowRelease(ctx context.Context, cfg *Config) (Release, error) {
	q, err := cfg.queries()
	if err != nil {
		return Release{}, err
	}
	var r Release
	var p50, p95, mx float64
	if err := cfg.Pool.QueryRow(ctx, q.workflowRelease).Scan(&r.Jobs, &p50, &p95, &mx); err != nil {
		return r, err
	}
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	r.P50, r.P95, r.Max = sec(p50), sec(p95), sec(mx)
	return r, nil
}
