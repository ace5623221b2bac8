package pgqueueui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pgqueue/pgqueue"
)

// maintenanceLease is the lease the maintenance leader holds: the same name
// as pgqueue's internal/maintenance (Lease) (TestOverviewShowsLeader keeps them equal).
const maintenanceLease = "pgqueue:maintenance"

// jobsPageSize is the jobs list's page.
const jobsPageSize = 50

// page is what every template gets.
type page struct {
	Title    string
	Base     string // the prefix, for links
	ReadOnly bool
	Nav      string
	CSRF     string
	Data     any
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p := page{Title: title, Base: h.prefix, ReadOnly: h.readOnly, Nav: name, Data: data}
	if !h.readOnly {
		p.CSRF = h.csrfToken(w, r)
	}
	var buf bytes.Buffer
	if err := h.tmpl[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		http.Error(w, "pgqueueui: rendering "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail renders the error page: msg is shown escaped.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", http.StatusText(status), msg)
}

// --- overview ---

type overviewData struct {
	Queues     []*pgqueue.QueueInfo
	Leader     *leaderInfo
	Throughput chart
	Refresh    int64 // milliseconds
	At         time.Time
	Done       string
}

type leaderInfo struct {
	Holder     string
	Fence      int64
	AcquiredAt time.Time
	Remaining  time.Duration
}

func (h *Handler) loadOverview(ctx context.Context) (*overviewData, error) {
	queues, err := h.client.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	d := &overviewData{Queues: queues, Refresh: h.refresh.Milliseconds(), At: time.Now()}
	var l leaderInfo
	var remUS int64
	err = h.pool.QueryRow(ctx, h.q.leader, maintenanceLease).Scan(&l.Holder, &l.Fence, &l.AcquiredAt, &remUS)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("leader: %w", err)
	default:
		l.Remaining = time.Duration(remUS) * time.Microsecond
		d.Leader = &l
	}
	rows, err := h.pool.Query(ctx, h.q.throughput)
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	var mins []time.Time
	var counts []int64
	var m time.Time
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&m, &n}, func() error {
		mins, counts = append(mins, m), append(counts, n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	d.Throughput = newChart(mins, counts)
	return d, nil
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	d, err := h.loadOverview(r.Context())
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d.Done = doneMessages[r.URL.Query().Get("done")]
	h.render(w, r, http.StatusOK, "overview", "Overview", d)
}

// overviewFragment is the overview's live part alone, which the page's
// script fetches and swaps in.
func (h *Handler) overviewFragment(w http.ResponseWriter, r *http.Request) {
	d, err := h.loadOverview(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p := page{Base: h.prefix, ReadOnly: h.readOnly, Data: d}
	var buf bytes.Buffer
	if err := h.tmpl["overview"].ExecuteTemplate(&buf, "live", p); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// chart is the throughput's bar chart, laid out for an inline SVG (no
// style attributes: the CSP forbids inline style).
type chart struct {
	Bars        []bar
	Total, Peak int64
	Width       int
	Height      int
}

type bar struct {
	X, Y, W, H int
	Minute     time.Time
	N          int64
}

func newChart(mins []time.Time, counts []int64) chart {
	const barW, gap, height = 8, 2, 60
	c := chart{Width: len(counts) * (barW + gap), Height: height}
	for _, n := range counts {
		c.Total += n
		c.Peak = max(c.Peak, n)
	}
	for i, n := range counts {
		bh := 0
		if c.Peak > 0 {
			bh = int(n * height / c.Peak)
			if n > 0 && bh == 0 {
				bh = 1
			}
		}
		c.Bars = append(c.Bars, bar{X: i * (barW + gap), Y: height - bh, W: barW, H: bh, Minute: mins[i], N: n})
	}
	return c
}

// --- jobs ---

type jobsData struct {
	Filter   jobsFilter
	States   []pgqueue.JobState
	Jobs     []*pgqueue.JobRow
	Workflow map[int64]int64 // each job's workflow, for those in one
	Next     string          // query string of the next page, empty on the last
	Error    string
	Filtered bool
}

type jobsFilter struct {
	Queue, Kind, State, Tag, Args string
}

// splitList reads a comma-separated filter value.
func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (h *Handler) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := jobsFilter{Queue: q.Get("queue"), Kind: q.Get("kind"), State: q.Get("state"), Tag: q.Get("tag"), Args: q.Get("args")}
	d := &jobsData{Filter: f, States: []pgqueue.JobState{pgqueue.StateBlocked, pgqueue.StateAvailable, pgqueue.StateScheduled, pgqueue.StateRunning,
		pgqueue.StateCompleted, pgqueue.StateDiscarded, pgqueue.StateCancelled}}
	params := &pgqueue.JobListParams{
		Queues: splitList(f.Queue), Kinds: splitList(f.Kind), Tags: splitList(f.Tag),
		Descending: true, Limit: jobsPageSize, Cursor: q.Get("cursor"),
	}
	for _, s := range splitList(f.State) {
		params.States = append(params.States, pgqueue.JobState(s))
	}
	if f.Args != "" {
		params.ArgsContain = json.RawMessage(f.Args)
		if !json.Valid(params.ArgsContain.(json.RawMessage)) {
			d.Error = "args: not valid JSON (want an object such as {\"customer_id\": 42})"
			h.render(w, r, http.StatusBadRequest, "jobs", "Jobs", d)
			return
		}
	}
	d.Filtered = f != jobsFilter{}
	res, err := h.client.JobList(r.Context(), params)
	if errors.Is(err, pgqueue.ErrInvalid) {
		d.Error = err.Error()
		h.render(w, r, http.StatusBadRequest, "jobs", "Jobs", d)
		return
	}
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d.Jobs = res.Jobs
	if d.Workflow, err = h.jobsWorkflows(r.Context(), res.Jobs); err != nil {
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	if res.NextCursor != "" {
		next := url.Values{}
		for k, v := range map[string]string{"queue": f.Queue, "kind": f.Kind, "state": f.State, "tag": f.Tag, "args": f.Args} {
			if v != "" {
				next.Set(k, v)
			}
		}
		next.Set("cursor", res.NextCursor)
		d.Next = "?" + next.Encode()
	}
	h.render(w, r, http.StatusOK, "jobs", "Jobs", d)
}

type jobData struct {
	Job                    *pgqueue.JobRow
	Args, Meta, Output     string
	Progress               string
	Done                   string
	CanRetry, CanCancel    bool
	CanDelete              bool
	LeaseLeft              time.Duration
	ErrorsNewestFirst      []pgqueue.AttemptError
	HasLease, HasFinalized bool
	Links                  *jobLinks
}

// prettyJSON indents stored JSON for display; it stays text.
func prettyJSON(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return string(b)
	}
	return buf.String()
}

// doneMessages are the notes an action's redirect can ask for: a fixed
// set, so the query string cannot put words on the page.
var doneMessages = map[string]string{
	"retry":           "The job was retried: it runs when a worker takes it, or, if it waits for other jobs, once they complete.",
	"cancel":          "The job was cancelled (a running job is asked to stop).",
	"cancel-workflow": "The workflow's jobs that had not ended were cancelled (running ones are asked to stop).",
	"retry-workflow":  "The workflow's discarded and cancelled jobs were retried: each runs when a worker takes it, or once the jobs it waits for complete.",
	"delete":          "The job was deleted.",
	"pause":           "The queue was paused.",
	"resume":          "The queue was resumed.",
	"limits":          "The queue's limits were saved: every client obeys them from now on.",
}

func parseID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id > 0
}

func (h *Handler) job(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(r)
	if !ok {
		h.fail(w, r, http.StatusNotFound, "no such job")
		return
	}
	j, err := h.client.JobGet(r.Context(), id)
	if errors.Is(err, pgqueue.ErrJobNotFound) {
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("job %d does not exist", id))
		return
	}
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := &jobData{
		Job: j, Args: prettyJSON(j.EncodedArgs), Meta: prettyJSON(j.Meta), Output: prettyJSON(j.Output),
		Progress: prettyJSON(j.Progress), Done: doneMessages[r.URL.Query().Get("done")],
		CanRetry: j.State != pgqueue.StateRunning && j.State != pgqueue.StateAvailable, CanCancel: !j.State.Final(),
		CanDelete: j.State != pgqueue.StateRunning, HasLease: !j.LeaseUntil.IsZero(), HasFinalized: !j.FinalizedAt.IsZero(),
	}
	if d.HasLease {
		d.LeaseLeft = time.Until(j.LeaseUntil).Round(time.Millisecond)
	}
	for i := len(j.Errors) - 1; i >= 0; i-- {
		d.ErrorsNewestFirst = append(d.ErrorsNewestFirst, j.Errors[i])
	}
	if d.Links, err = h.loadJobLinks(r.Context(), id); err != nil {
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	h.render(w, r, http.StatusOK, "job", fmt.Sprintf("Job %d", id), d)
}

// --- actions ---

type confirmData struct {
	Verb, What, Action string // Action: the form's path below the prefix
	Name               string // the queue of a queue action
	Back               string
}

var jobActions = map[string]string{"retry": "Retry", "cancel": "Cancel", "delete": "Delete"}
var queueActions = map[string]string{"pause": "Pause", "resume": "Resume"}

// confirmJobAction is the page that asks before an action: GET shows it,
// only its POST acts.
func (h *Handler) confirmJobAction(w http.ResponseWriter, r *http.Request) {
	action, verb, id, ok := h.actionOn(w, r, jobActions)
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "confirm", verb+" job", &confirmData{
		Verb: verb, What: fmt.Sprintf("job %d", id), Action: fmt.Sprintf("/jobs/%d/%s", id, action),
		Back: fmt.Sprintf("/jobs/%d", id),
	})
}

func (h *Handler) jobAction(w http.ResponseWriter, r *http.Request) {
	action, _, id, ok := h.actionOn(w, r, jobActions)
	if !ok {
		return
	}
	var err error
	switch action {
	case "retry":
		_, err = h.client.JobRetry(r.Context(), id)
	case "cancel":
		_, err = h.client.JobCancel(r.Context(), id)
	case "delete":
		_, err = h.client.JobDelete(r.Context(), id)
	}
	switch {
	case errors.Is(err, pgqueue.ErrJobNotFound):
		h.fail(w, r, http.StatusNotFound, fmt.Sprintf("job %d does not exist", id))
	case errors.Is(err, pgqueue.ErrJobRunning):
		h.fail(w, r, http.StatusConflict, fmt.Sprintf("job %d is running: cancel it first, or wait for it to finish", id))
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	case action == "delete":
		http.Redirect(w, r, h.prefix+"/jobs?done=delete", http.StatusSeeOther)
	default:
		http.Redirect(w, r, fmt.Sprintf("%s/jobs/%d?done=%s", h.prefix, id, action), http.StatusSeeOther)
	}
}

func (h *Handler) confirmQueueAction(w http.ResponseWriter, r *http.Request) {
	verb, ok := queueActions[r.PathValue("action")]
	name := r.URL.Query().Get("name")
	if !ok || name == "" {
		h.fail(w, r, http.StatusNotFound, "no such page")
		return
	}
	if !h.writable(w, r) {
		return
	}
	h.render(w, r, http.StatusOK, "confirm", verb+" queue", &confirmData{
		Verb: verb, What: "queue " + strconv.Quote(name), Action: "/queues/" + r.PathValue("action"), Name: name, Back: "/",
	})
}

func (h *Handler) queueAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if _, ok := queueActions[action]; !ok {
		h.fail(w, r, http.StatusNotFound, "no such action")
		return
	}
	if !h.writable(w, r) {
		return
	}
	name := r.PostFormValue("name")
	var err error
	if action == "pause" {
		err = h.client.QueuePause(r.Context(), name)
	} else {
		err = h.client.QueueResume(r.Context(), name)
	}
	switch {
	case errors.Is(err, pgqueue.ErrInvalid):
		h.fail(w, r, http.StatusBadRequest, err.Error())
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	default:
		http.Redirect(w, r, h.prefix+"/?done="+action, http.StatusSeeOther)
	}
}

// --- locks ---

type leaseRow struct {
	Name, Holder          string
	Fence                 int64
	AcquiredAt, ExpiresAt time.Time
	Remaining             time.Duration
	Leader                bool
}

type advisoryRow struct {
	ClassID, ObjID              int64
	ObjSubID                    int
	Mode                        string
	Granted                     bool
	PID                         int
	App, Addr, User, State      string
	SessionAge                  time.Duration
	BackendStartValid, KeyInt64 bool
	Key                         int64
}

type locksData struct {
	Leases   []leaseRow
	Advisory []advisoryRow
}

func (h *Handler) locks(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	d := &locksData{}
	rows, err := h.pool.Query(ctx, h.q.leases)
	if err == nil {
		var l leaseRow
		var remUS int64
		_, err = pgx.ForEachRow(rows, []any{&l.Name, &l.Holder, &l.Fence, &l.AcquiredAt, &l.ExpiresAt, &remUS}, func() error {
			l.Remaining = (time.Duration(remUS) * time.Microsecond).Round(time.Millisecond)
			l.Leader = l.Name == maintenanceLease
			d.Leases = append(d.Leases, l)
			return nil
		})
	}
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, "leases: "+err.Error())
		return
	}
	rows, err = h.pool.Query(ctx, h.q.advisoryLocks)
	if err == nil {
		var a advisoryRow
		var start pgtype.Timestamptz
		_, err = pgx.ForEachRow(rows, []any{&a.ClassID, &a.ObjID, &a.ObjSubID, &a.Mode, &a.Granted, &a.PID,
			&a.App, &a.Addr, &a.User, &a.State, &start}, func() error {
			a.BackendStartValid = start.Valid
			if start.Valid {
				a.SessionAge = time.Since(start.Time).Round(time.Second)
			}
			// The one-bigint form splits the key: high half in classid.
			a.KeyInt64 = a.ObjSubID == 1
			a.Key = a.ClassID<<32 | a.ObjID
			d.Advisory = append(d.Advisory, a)
			return nil
		})
	}
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, "advisory locks: "+err.Error())
		return
	}
	h.render(w, r, http.StatusOK, "locks", "Locks", d)
}

// --- periodic ---

type periodicRow struct {
	Name        string
	LastInstant time.Time
	StartTerm   pgtype.Int8
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Schedule    pgtype.Text
	NextAt      pgtype.Timestamptz
}

func (h *Handler) periodic(w http.ResponseWriter, r *http.Request) {
	rows, err := h.pool.Query(r.Context(), h.q.periodicJobs)
	var out []periodicRow
	if err == nil {
		var p periodicRow
		_, err = pgx.ForEachRow(rows, []any{&p.Name, &p.LastInstant, &p.StartTerm, &p.CreatedAt, &p.UpdatedAt, &p.Schedule, &p.NextAt}, func() error {
			out = append(out, p)
			return nil
		})
	}
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, "periodic jobs: "+err.Error())
		return
	}
	h.render(w, r, http.StatusOK, "periodic", "Periodic jobs", out)
}

// RefreshDuration is the refresh interval for the template.
func (d *overviewData) RefreshDuration() time.Duration {
	return time.Duration(d.Refresh) * time.Millisecond
}
