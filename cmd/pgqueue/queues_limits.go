package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/limitspec"
)

// limitsJSON is a queue's flow limits as --json prints them: 0 for no
// limit, a null rate for none.
type limitsJSON struct {
	MaxRunning       int           `json:"max_running"`
	MaxRunningPerKey int           `json:"max_running_per_key"`
	Rate             *rateJSON     `json:"rate"`
	PartitionBy      partitionJSON `json:"partition_by"`
	SequenceContinue bool          `json:"sequence_continue"`
}

type rateJSON struct {
	Limit int `json:"limit"`
	// Period is written as --rate takes it ("1m"); PeriodMS is the same in
	// milliseconds, for programs.
	Period   string  `json:"period"`
	PeriodMS float64 `json:"period_ms"`
	PerKey   bool    `json:"per_key"`
}

type partitionJSON struct {
	Kind       bool     `json:"kind"`
	ArgsFields []string `json:"args_fields"`
}

func newLimitsJSON(l pgqueue.QueueLimits) limitsJSON {
	out := limitsJSON{MaxRunning: l.MaxRunning, MaxRunningPerKey: l.MaxRunningPerKey, SequenceContinue: l.SequenceContinue,
		PartitionBy: partitionJSON{Kind: l.PartitionBy.Kind, ArgsFields: append([]string{}, l.PartitionBy.ArgsFields...)}}
	if l.Rate.Limit > 0 {
		out.Rate = &rateJSON{Limit: l.Rate.Limit, Period: limitspec.FormatPeriod(l.Rate.Period),
			PeriodMS: float64(l.Rate.Period.Microseconds()) / 1000, PerKey: l.Rate.PerKey}
	}
	return out
}

// heldJSON is QueueHeldBack's count as --json prints it.
type heldJSON struct {
	InSequence   int64 `json:"in_sequence"`
	ByKeyLimit   int64 `json:"by_key_limit"`
	ByKeyRate    int64 `json:"by_key_rate"`
	Ready        int64 `json:"ready"`
	Running      int64 `json:"running"`
	KeysAtLimit  int64 `json:"keys_at_limit"`
	RateStarts   int64 `json:"rate_starts"`
	AtMaxRunning bool  `json:"at_max_running"`
	AtRate       bool  `json:"at_rate"`
}

// queueLimitsJSON is what queues limit and queues limits print with
// --json; Held only for queues limits.
type queueLimitsJSON struct {
	Queue  string     `json:"queue"`
	Limits limitsJSON `json:"limits"`
	Held   *heldJSON  `json:"held,omitempty"`
}

// compactLimits is the LIMITS column of queues list: key=value items, "-"
// for none.
func compactLimits(l pgqueue.QueueLimits) string {
	var items []string
	if l.MaxRunning > 0 {
		items = append(items, "max="+strconv.Itoa(l.MaxRunning))
	}
	if l.MaxRunningPerKey > 0 {
		items = append(items, "key-max="+strconv.Itoa(l.MaxRunningPerKey))
	}
	if l.Rate.Limit > 0 {
		name := "rate="
		if l.Rate.PerKey {
			name = "key-rate="
		}
		items = append(items, name+limitspec.FormatRate(l.Rate.Limit, l.Rate.Period))
	}
	if by := limitspec.FormatPartitionBy(l.PartitionBy.Kind, l.PartitionBy.ArgsFields); by != "" {
		items = append(items, "by="+by)
	}
	if l.SequenceContinue {
		items = append(items, "seq=continue")
	}
	if len(items) == 0 {
		return "-"
	}
	return strings.Join(items, " ")
}

// limitFlags are the flags of queues limit: together they state the whole
// new limits.
type limitFlags struct {
	maxRunning, maxRunningPerKey int
	rate, partitionBy            string
	ratePerKey, seqContinue      bool
	clear                        bool
}

func (f *limitFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.maxRunning, "max-running", 0, "")
	fs.IntVar(&f.maxRunningPerKey, "max-running-per-key", 0, "")
	fs.StringVar(&f.rate, "rate", "", "")
	fs.BoolVar(&f.ratePerKey, "rate-per-key", false, "")
	fs.StringVar(&f.partitionBy, "partition-by", "", "")
	fs.BoolVar(&f.seqContinue, "sequence-continue", false, "")
	fs.BoolVar(&f.clear, "clear", false, "")
}

// limitFlagNames are the flags that state limits, as opposed to the
// database and output flags.
var limitFlagNames = map[string]bool{
	"max-running": true, "max-running-per-key": true, "rate": true, "rate-per-key": true,
	"partition-by": true, "sequence-continue": true,
}

// limits checks the flags given (set names them) and returns the limits
// they state.
func (f *limitFlags) limits(set map[string]bool) (pgqueue.QueueLimits, error) {
	var l pgqueue.QueueLimits
	given := 0
	for name := range set {
		if limitFlagNames[name] {
			given++
		}
	}
	switch {
	case f.clear && given > 0:
		return l, usagef("--clear removes every limit: give it alone, or give the new limits without it")
	case f.clear:
		return l, nil
	case given == 0:
		return l, usagef("limit takes the queue's new limits (--max-running, --max-running-per-key, --rate, " +
			"--rate-per-key, --partition-by, --sequence-continue), or --clear to remove them")
	case set["max-running"] && f.maxRunning < 1:
		return l, usagef("--max-running must be at least 1, got %d (leave it out for no limit; queues pause stops a queue)", f.maxRunning)
	case set["max-running-per-key"] && f.maxRunningPerKey < 1:
		return l, usagef("--max-running-per-key must be at least 1, got %d (leave it out for no limit)", f.maxRunningPerKey)
	case f.ratePerKey && f.rate == "":
		return l, usagef("--rate-per-key needs --rate")
	}
	l.MaxRunning, l.MaxRunningPerKey, l.SequenceContinue = f.maxRunning, f.maxRunningPerKey, f.seqContinue
	if set["rate"] {
		limit, period, err := limitspec.ParseRate(f.rate)
		if err != nil {
			return l, usagef("--rate: %v", err)
		}
		l.Rate = pgqueue.Rate{Limit: limit, Period: period, PerKey: f.ratePerKey}
	}
	if set["partition-by"] {
		kind, fields, err := limitspec.ParsePartitionBy(f.partitionBy)
		if err != nil {
			return l, usagef("--partition-by: %v", err)
		}
		l.PartitionBy = pgqueue.PartitionBy{Kind: kind, ArgsFields: fields}
	}
	return l, nil
}

func queuesLimit(ctx context.Context, args []string, stdout io.Writer) error {
	var (
		f  readFlags
		lf limitFlags
	)
	fs := newFlagSet("queues limit")
	f.register(fs)
	lf.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("limit takes one queue name, got %d arguments", len(pos))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	limits, err := lf.limits(set)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	pool, client, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	name := pos[0]
	if err := client.QueueSetLimits(ctx, name, limits); err != nil {
		return err
	}
	// Print what is stored, read back, not what the flags said.
	stored, err := queueLimits(ctx, client, name)
	if err != nil {
		return err
	}
	out := queueLimitsJSON{Queue: name, Limits: newLimitsJSON(stored)}
	if f.json {
		return writeJSON(stdout, out)
	}
	if lf.clear {
		fmt.Fprintf(stdout, "removed the limits of queue %s\n", name)
	} else {
		fmt.Fprintf(stdout, "set the limits of queue %s\n", name)
	}
	t := newTable(stdout, "queue:", name)
	limitRows(t, stored)
	t.flush()
	return nil
}

// queueLimits returns the stored limits of the queue name: the API has no
// call for one queue, so it is looked up in QueueList (a queue with no
// row and no unfinished job has none).
func queueLimits(ctx context.Context, client *pgqueue.Client, name string) (pgqueue.QueueLimits, error) {
	qs, err := client.QueueList(ctx)
	if err != nil {
		return pgqueue.QueueLimits{}, err
	}
	for _, q := range qs {
		if q.Name == name {
			return q.Limits, nil
		}
	}
	return pgqueue.QueueLimits{}, nil
}

// limitRows adds a row per limit to t.
func limitRows(t *table, l pgqueue.QueueLimits) {
	none := func(n int) string {
		if n == 0 {
			return "none"
		}
		return strconv.Itoa(n)
	}
	t.row("max running:", none(l.MaxRunning))
	t.row("max running per key:", none(l.MaxRunningPerKey))
	rate := "none"
	if l.Rate.Limit > 0 {
		rate = limitspec.FormatRate(l.Rate.Limit, l.Rate.Period)
		if l.Rate.PerKey {
			rate += " per partition key"
		}
	}
	t.row("rate:", rate)
	by := limitspec.FormatPartitionBy(l.PartitionBy.Kind, l.PartitionBy.ArgsFields)
	if by == "" {
		by = "none (only a job's own partition key)"
	}
	t.row("partition by:", by)
	if l.SequenceContinue {
		t.row("sequences:", "continue past a discarded or cancelled job")
	} else {
		t.row("sequences:", "held by a discarded or cancelled job")
	}
}

func queuesLimits(ctx context.Context, args []string, stdout io.Writer) error {
	var f readFlags
	fs := newFlagSet("queues limits")
	f.register(fs)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("limits takes one queue name, got %d arguments", len(pos))
	}
	if err := f.check(); err != nil {
		return err
	}
	pool, client, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	name := pos[0]
	held, err := client.QueueHeldBack(ctx, name)
	if err != nil {
		return err
	}
	limits, err := queueLimits(ctx, client, name)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(stdout, queueLimitsJSON{Queue: name, Limits: newLimitsJSON(limits), Held: &heldJSON{
			InSequence: held.InSequence, ByKeyLimit: held.ByKeyLimit, ByKeyRate: held.ByKeyRate, Ready: held.Ready,
			Running: held.Running, KeysAtLimit: held.KeysAtLimit, RateStarts: held.RateStarts,
			AtMaxRunning: held.AtMaxRunning, AtRate: held.AtRate,
		}})
	}
	t := newTable(stdout, "queue:", name)
	limitRows(t, limits)
	n := strconv.FormatInt
	running := n(held.Running, 10)
	if held.AtMaxRunning {
		running += " (at max running)"
	}
	t.row("running:", running)
	if limits.MaxRunningPerKey > 0 {
		t.row("keys at max running:", n(held.KeysAtLimit, 10))
	}
	if limits.Rate.Limit > 0 && !limits.Rate.PerKey {
		starts := n(held.RateStarts, 10) + " in the last " + limitspec.FormatPeriod(limits.Rate.Period)
		if held.AtRate {
			starts += " (rate used)"
		}
		t.row("rate starts:", starts)
	}
	t.row("available jobs:", n(held.InSequence+held.ByKeyLimit+held.ByKeyRate+held.Ready, 10))
	t.row("  in a sequence:", n(held.InSequence, 10))
	t.row("  key at max running:", n(held.ByKeyLimit, 10))
	t.row("  key used its rate:", n(held.ByKeyRate, 10))
	ready := n(held.Ready, 10)
	switch {
	case held.Ready > 0 && held.AtMaxRunning:
		ready += " (waiting: the queue is at max running)"
	case held.Ready > 0 && held.AtRate:
		ready += " (waiting: the queue used its rate)"
	}
	t.row("  ready:", ready)
	t.flush()
	return nil
}
