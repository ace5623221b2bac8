package bench

import (
	"bytes"
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTicks is the unit of /proc/<pid>/stat's CPU times: USER_HZ, which
// Linux reports as 100 on every architecture whatever the kernel's HZ.
const clockTicks = 100

// sampleEvery is how often the sampler looks for the run's backends and
// reads their CPU: a backend that exits between two samples loses at most
// this much of its CPU (the run's pool keeps its connections, so none
// should).
const sampleEvery = 200 * time.Millisecond

// procCPU reads the CPU time of process pid from /proc, and its parent's
// pid. The time is schedstat's, in nanoseconds, where the kernel has it:
// stat's utime + stime are truncated to whole ticks (10 ms) per process,
// so a backend that used 3 ms reads 0 or 10 ms, and a short run's dozen
// backends often read no CPU at all.
func procCPU(pid int) (cpu time.Duration, ppid int, ok bool) {
	cpu, ppid, ok = procStatCPU(pid)
	if !ok {
		return 0, 0, false
	}
	if ns, ok := procSchedCPU(pid); ok {
		cpu = ns
	}
	return cpu, ppid, true
}

// procSchedCPU reads the first field of /proc/<pid>/schedstat: the time
// the process ran, in nanoseconds.
func procSchedCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(string(f[0]), 10, 64)
	return time.Duration(ns), err == nil
}

// procStatCPU reads utime + stime and the parent's pid from
// /proc/<pid>/stat.
func procStatCPU(pid int) (cpu time.Duration, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold spaces: count the
	// fields after its closing parenthesis (state is field 3).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(string(f[1]))
	utime, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, ppid, true
}

// isPostgres says whether process pid on this machine is a PostgreSQL
// process: a server elsewhere (another host, another pid namespace) has
// pids that name nothing here, or something else.
func isPostgres(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.HasPrefix(b, []byte("postgres"))
}

// busyBackend is the CPU a run's backend must use to count as one that
// served it (Usage.ServerBackends): a pool's idle connections use a little
// for their pings.
const busyBackend = 10 * time.Millisecond

// backends is how many of the run's backends used busyBackend or more, as
// of the last read.
func (s *serverCPU) backends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

// serverCPU samples the CPU of a run's server processes: the backends
// with the run's application_name, and separately the server's own
// processes, until read.
type serverCPU struct {
	conn *pgx.Conn
	app  string
	sql  string

	mu         sync.Mutex
	ok         bool                  // the server's processes are readable here
	base, last map[int]time.Duration // by pid: at mark, and at the last sample
	ours       map[int]bool          // the run's backends; the rest is background
	postmaster int
	busy       int // the run's backends that used busyBackend or more, at read

	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	// own is the CPU the sampling goroutine used between mark and its
	// end, on its own thread: the client's CPU of a run leaves it out,
	// since the meter is not the client's work (sampling every 200 ms
	// was 0.17 s of a 500,000-job burn-down's client CPU profile).
	own time.Duration
}

// startServerCPU connects the sampler (its own backend, not the run's) and
// checks that the server's processes can be read from here.
func startServerCPU(ctx context.Context, cfg *Config, app string) (*serverCPU, error) {
	q, err := cfg.queries()
	if err != nil {
		return nil, err
	}
	cc := cfg.Pool.Config().ConnConfig.Copy()
	cc.Tracer = nil
	cc.RuntimeParams["application_name"] = app + "_meter"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, err
	}
	s := &serverCPU{conn: conn, app: app, sql: q.backends}
	var pid int
	if err := conn.QueryRow(ctx, q.backendPID).Scan(&pid); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	s.ok = isPostgres(pid)
	return s, nil
}

// mark starts the measurement: CPU from now, sampled until read.
func (s *serverCPU) mark() {
	if !s.ok {
		return
	}
	s.mu.Lock()
	s.base, s.last, s.ours = map[int]time.Duration{}, map[int]time.Duration{}, map[int]bool{}
	s.mu.Unlock()
	s.sample(context.Background(), true)
	s.quit, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		// Locked to a thread that runs nothing else, so that the thread's
		// CPU is the sampling's own.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		start := threadCPU()
		defer func() { s.own = threadCPU() - start }()
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-s.quit:
				return
			case <-t.C:
				s.sample(context.Background(), false)
			}
		}
	}()
}

// sample finds the processes to measure and reads their CPU; at the mark,
// what they used so far is the base, and a process found later starts
// from zero (a backend opened, an autovacuum worker started, during the
// run).
func (s *serverCPU) sample(ctx context.Context, mark bool) {
	rows, err := s.conn.Query(ctx, s.sql, s.app)
	if err != nil {
		return
	}
	type proc struct {
		pid  int
		ours bool
	}
	var procs []proc
	for rows.Next() {
		var p proc
		if rows.Scan(&p.pid, &p.ours) == nil {
			procs = append(procs, p)
		}
	}
	rows.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range procs {
		cpu, ppid, ok := procCPU(p.pid)
		if !ok {
			continue
		}
		if s.postmaster == 0 && !p.ours {
			// The background processes' parent: the postmaster, which
			// pg_stat_activity does not list.
			s.postmaster = ppid
		}
		s.update(p.pid, cpu, p.ours, mark)
	}
	if s.postmaster != 0 {
		if cpu, _, ok := procCPU(s.postmaster); ok {
			s.update(s.postmaster, cpu, false, mark)
		}
	}
}

func (s *serverCPU) update(pid int, cpu time.Duration, ours, mark bool) {
	if _, seen := s.last[pid]; !seen {
		s.ours[pid] = ours
		if mark {
			s.base[pid] = cpu
		}
	}
	s.last[pid] = cpu
}

// read ends the sampling and returns the run's backends' CPU and the
// background processes' CPU since mark. It reports not measured (ok false)
// when the server's processes cannot be read from here. A backend of the
// run that was gone by the final sample counts with its last sample: the
// clients' listen and session connections close at Stop, before the final
// read, and each such backend loses at most sampleEvery of its CPU (the
// run's pools, which do the work, stay open until read).
func (s *serverCPU) read(ctx context.Context) (ok bool, ours, background time.Duration) {
	if !s.ok {
		return false, 0, 0
	}
	s.stopSampling()
	s.sample(ctx, false)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = 0
	for pid, cpu := range s.last {
		d := cpu - s.base[pid]
		if s.ours[pid] {
			ours += d
			if d >= busyBackend {
				s.busy++
			}
		} else {
			background += d
		}
	}
	return true, ours, background
}

// ownCPU ends the sampling goroutine and returns the CPU it used since
// mark.
func (s *serverCPU) ownCPU() time.Duration {
	s.stopSampling()
	return s.own
}

// stopSampling ends the sampling goroutine, if mark started one.
func (s *serverCPU) stopSampling() {
	if s.quit == nil {
		return
	}
	s.stopOnce.Do(func() {
		close(s.quit)
		<-s.done
	})
}

// close stops the sampling, if a run ended without read, and closes the
// sampler's connection.
func (s *serverCPU) close() {
	s.stopSampling()
	_ = s.conn.Close(context.Background())
}
