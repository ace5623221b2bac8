package workerkit

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgqueue/pgqueue"
)

// queueCacheTTL is how long /metrics reuses the queue counts it read:
// QueueList costs in proportion to the backlog, and several scrapers (or
// a short scrape interval) must not multiply that.
const queueCacheTTL = 5 * time.Second

// metrics counts what this process's client does, through a work
// middleware and the client's Observer, and writes it with the schema's
// queue counts in the Prometheus text format, with no Prometheus
// library.
type metrics struct {
	running atomic.Int64

	mu       sync.Mutex
	attempts map[attemptKey]uint64
	seconds  map[string]float64 // by kind
	count    map[string]uint64  // by kind
	claimed  map[string]uint64  // by queue
	results  map[[2]string]uint64
	refused  map[string]uint64 // by write
	rescued  map[[2]string]uint64

	queueMu  sync.Mutex
	queues   []*pgqueue.QueueInfo
	queuesAt time.Time
	queueErr bool
}

type attemptKey struct {
	kind    string
	outcome pgqueue.Outcome
}

func newMetrics() *metrics {
	return &metrics{attempts: map[attemptKey]uint64{}, seconds: map[string]float64{}, count: map[string]uint64{},
		claimed: map[string]uint64{}, results: map[[2]string]uint64{}, refused: map[string]uint64{}, rescued: map[[2]string]uint64{}}
}

// observer returns an Observer that counts for m and then calls user's
// functions, if any.
func (m *metrics) observer(user *pgqueue.Observer) *pgqueue.Observer {
	var u pgqueue.Observer
	if user != nil {
		u = *user
	}
	o := u // Queues and QueuesInterval stay the user's
	add := func(f func()) {
		m.mu.Lock()
		f()
		m.mu.Unlock()
	}
	o.Claimed = func(queue string, jobs int) {
		add(func() { m.claimed[queue] += uint64(jobs) })
		if u.Claimed != nil {
			u.Claimed(queue, jobs)
		}
	}
	o.ResultRecorded = func(job *pgqueue.JobRow, result pgqueue.Outcome) {
		add(func() { m.results[[2]string{job.Kind, string(result)}]++ })
		if u.ResultRecorded != nil {
			u.ResultRecorded(job, result)
		}
	}
	o.WriteRefused = func(job *pgqueue.JobRow, write pgqueue.FencedWrite) {
		add(func() { m.refused[string(write)]++ })
		if u.WriteRefused != nil {
			u.WriteRefused(job, write)
		}
	}
	o.Rescued = func(job pgqueue.RescuedJob) {
		add(func() { m.rescued[[2]string{job.Queue, string(job.State)}]++ })
		if u.Rescued != nil {
			u.Rescued(job)
		}
	}
	return &o
}

// sortedPairs returns m's keys in order.
func sortedPairs(m map[[2]string]uint64) [][2]string {
	return slices.SortedFunc(maps.Keys(m), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
}

// Work implements pgqueue.WorkMiddleware: it counts the attempt by its
// outcome and times it.
func (m *metrics) Work(ctx context.Context, job *pgqueue.JobRow, next func(context.Context) error) error {
	m.running.Add(1)
	defer m.running.Add(-1)
	start := time.Now()
	err := next(ctx)
	took := time.Since(start).Seconds()
	outcome := pgqueue.OutcomeOf(ctx, err)
	m.mu.Lock()
	m.attempts[attemptKey{job.Kind, outcome}]++
	m.seconds[job.Kind] += took
	m.count[job.Kind]++
	m.mu.Unlock()
	return err
}

// queueInfo returns the schema's queues, read at most every
// queueCacheTTL, and whether the last read failed.
func (m *metrics) queueInfo(ctx context.Context, client *pgqueue.Client) ([]*pgqueue.QueueInfo, bool) {
	m.queueMu.Lock()
	defer m.queueMu.Unlock()
	if client == nil || time.Since(m.queuesAt) < queueCacheTTL {
		return m.queues, m.queueErr
	}
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	qs, err := client.QueueList(ctx)
	m.queuesAt = time.Now()
	if err != nil {
		m.queueErr = true
		return m.queues, true
	}
	m.queues, m.queueErr = qs, false
	return qs, false
}

// write writes every metric in the Prometheus text format.
func (m *metrics) write(ctx context.Context, w io.Writer, p *process) {
	e := &expo{w: w}

	m.mu.Lock()
	keys := slices.SortedFunc(maps.Keys(m.attempts), func(a, b attemptKey) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.outcome, b.outcome))
	})
	e.family("pgqueue_attempts_total", "counter", "Job attempts this process ran, by kind and outcome (completed, failed, snoozed, cancelled, stopped, lost).")
	for _, k := range keys {
		e.sample("pgqueue_attempts_total", labels("kind", k.kind, "outcome", string(k.outcome)), float64(m.attempts[k]))
	}
	kinds := slices.Sorted(maps.Keys(m.count))
	e.family("pgqueue_attempt_duration_seconds", "summary", "Time this process spent in job attempts, by kind.")
	for _, k := range kinds {
		e.sample("pgqueue_attempt_duration_seconds_sum", labels("kind", k), m.seconds[k])
		e.sample("pgqueue_attempt_duration_seconds_count", labels("kind", k), float64(m.count[k]))
	}
	e.family("pgqueue_jobs_claimed_total", "counter", "Jobs this process claimed, by queue.")
	for _, q := range slices.Sorted(maps.Keys(m.claimed)) {
		e.sample("pgqueue_jobs_claimed_total", labels("queue", q), float64(m.claimed[q]))
	}
	e.family("pgqueue_job_results_total", "counter", "Job results this process wrote, by kind and result (completed, retried, discarded, cancelled, snoozed, released).")
	for _, k := range sortedPairs(m.results) {
		e.sample("pgqueue_job_results_total", labels("kind", k[0], "result", k[1]), float64(m.results[k]))
	}
	e.family("pgqueue_writes_refused_total", "counter", "Writes of this process refused by a job's fence (the job was taken over), by write.")
	for _, w := range slices.Sorted(maps.Keys(m.refused)) {
		e.sample("pgqueue_writes_refused_total", labels("write", w), float64(m.refused[w]))
	}
	e.family("pgqueue_jobs_rescued_total", "counter", "Jobs this process rescued as maintenance leader after their lease expired, by queue and resulting state.")
	for _, k := range sortedPairs(m.rescued) {
		e.sample("pgqueue_jobs_rescued_total", labels("queue", k[0], "state", k[1]), float64(m.rescued[k]))
	}
	m.mu.Unlock()

	e.family("pgqueue_jobs_running", "gauge", "Jobs this process is running now.")
	e.sample("pgqueue_jobs_running", "", float64(m.running.Load()))
	state := p.state.Load()
	e.family("pgqueue_worker_ready", "gauge", "1 when the client is started and not draining.")
	e.sample("pgqueue_worker_ready", "", b2f(state == stateReady))
	e.family("pgqueue_worker_draining", "gauge", "1 while the process drains after a stop signal.")
	e.sample("pgqueue_worker_draining", "", b2f(state == stateDraining))

	if pool := p.pool.Load(); pool != nil {
		st := pool.Stat()
		e.family("pgqueue_pool_connections", "gauge", "Connections of this process's pool, by state.")
		e.sample("pgqueue_pool_connections", labels("state", "acquired"), float64(st.AcquiredConns()))
		e.sample("pgqueue_pool_connections", labels("state", "idle"), float64(st.IdleConns()))
		e.sample("pgqueue_pool_connections", labels("state", "constructing"), float64(st.ConstructingConns()))
		e.family("pgqueue_pool_max_connections", "gauge", "The pool's connection limit.")
		e.sample("pgqueue_pool_max_connections", "", float64(st.MaxConns()))
	}

	client := p.client.Load()
	if client == nil {
		return
	}
	qs, failed := m.queueInfo(ctx, client)
	e.family("pgqueue_queue_up", "gauge", "1 when the last read of the schema's queue counts succeeded.")
	e.sample("pgqueue_queue_up", "", b2f(!failed))
	e.family("pgqueue_queue_jobs", "gauge", "Unfinished jobs of each queue of the schema (all processes), by state; read at most every 5s.")
	for _, q := range qs {
		e.sample("pgqueue_queue_jobs", labels("queue", q.Name, "state", "scheduled"), float64(q.Scheduled))
		e.sample("pgqueue_queue_jobs", labels("queue", q.Name, "state", "available"), float64(q.Available))
		e.sample("pgqueue_queue_jobs", labels("queue", q.Name, "state", "running"), float64(q.Running))
	}
	e.family("pgqueue_queue_oldest_available_age_seconds", "gauge", "How long the oldest available job of each queue has waited; 0 when none waits.")
	for _, q := range qs {
		e.sample("pgqueue_queue_oldest_available_age_seconds", labels("queue", q.Name), q.OldestAvailableAge.Seconds())
	}
	e.family("pgqueue_queue_paused", "gauge", "1 when the queue is paused.")
	for _, q := range qs {
		e.sample("pgqueue_queue_paused", labels("queue", q.Name), b2f(q.Paused))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// expo writes the text exposition format.
type expo struct{ w io.Writer }

func (e *expo) family(name, typ, help string) {
	fmt.Fprintf(e.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (e *expo) sample(name, labels string, v float64) {
	fmt.Fprintf(e.w, "%s%s %s\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64))
}

// labelEscaper escapes a label value as the format requires.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// labels renders name, value pairs as {name="value",...}.
func labels(kv ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `%s="%s"`, kv[i], labelEscaper.Replace(kv[i+1]))
	}
	b.WriteByte('}')
	return b.String()
}
