package pgqueueui

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/limitspec"
)

// --- a queue: its counts, flow limits and held-back jobs ---

type queueData struct {
	Queue *pgqueue.QueueInfo
	Held  *pgqueue.QueueHeld
	// ShowHeld is set for a queue with limits or with jobs waiting in a
	// sequence: the others hold nothing back.
	ShowHeld bool
	Form     limitsForm
	Done     string
	Error    string
}

// limitsForm is the limits form's fields as text: the stored limits, or
// what was submitted when it was refused.
type limitsForm struct {
	MaxRunning, MaxRunningPerKey, Rate, PartitionBy string
	RatePerKey, SequenceContinue                    bool
}

func newLimitsForm(l pgqueue.QueueLimits) limitsForm {
	f := limitsForm{RatePerKey: l.Rate.PerKey, SequenceContinue: l.SequenceContinue,
		PartitionBy: limitspec.FormatPartitionBy(l.PartitionBy.Kind, l.PartitionBy.ArgsFields)}
	if l.MaxRunning > 0 {
		f.MaxRunning = strconv.Itoa(l.MaxRunning)
	}
	if l.MaxRunningPerKey > 0 {
		f.MaxRunningPerKey = strconv.Itoa(l.MaxRunningPerKey)
	}
	if l.Rate.Limit > 0 {
		f.Rate = limitspec.FormatRate(l.Rate.Limit, l.Rate.Period)
	}
	return f
}

// limits reads the form: an empty field is no limit.
func (f limitsForm) limits() (pgqueue.QueueLimits, error) {
	var l pgqueue.QueueLimits
	count := func(field, s string) (int, error) {
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return 0, errors.New(field + " must be a whole number of at least 1, or empty for no limit")
		}
		return n, nil
	}
	var err error
	if l.MaxRunning, err = count("Max running", f.MaxRunning); err != nil {
		return l, err
	}
	if l.MaxRunningPerKey, err = count("Max running per key", f.MaxRunningPerKey); err != nil {
		return l, err
	}
	switch {
	case f.Rate != "":
		limit, period, err := limitspec.ParseRate(f.Rate)
		if err != nil {
			return l, err
		}
		l.Rate = pgqueue.Rate{Limit: limit, Period: period, PerKey: f.RatePerKey}
	case f.RatePerKey:
		return l, errors.New("per key needs a rate")
	}
	kind, fields, err := limitspec.ParsePartitionBy(f.PartitionBy)
	if err != nil {
		return l, err
	}
	l.PartitionBy = pgqueue.PartitionBy{Kind: kind, ArgsFields: fields}
	l.SequenceContinue = f.SequenceContinue
	return l, nil
}

// loadQueue reads the queue name and what holds its jobs back. A queue
// with no jobs and no row is shown empty: limits may be set before its
// first job.
func (h *Handler) loadQueue(ctx context.Context, name string) (*queueData, error) {
	held, err := h.client.QueueHeldBack(ctx, name)
	if err != nil {
		return nil, err
	}
	// The API reads queues only all at once.
	queues, err := h.client.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	d := &queueData{Queue: &pgqueue.QueueInfo{Name: name}, Held: held}
	for _, q := range queues {
		if q.Name == name {
			d.Queue = q
		}
	}
	d.ShowHeld = !d.Queue.Limits.IsZero() || held.InSequence > 0
	d.Form = newLimitsForm(d.Queue.Limits)
	return d, nil
}

func (h *Handler) queue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	d, err := h.loadQueue(r.Context(), name)
	switch {
	case errors.Is(err, pgqueue.ErrInvalid):
		h.fail(w, r, http.StatusNotFound, "no such queue: "+err.Error())
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d.Done = doneMessages[r.URL.Query().Get("done")]
	h.render(w, r, http.StatusOK, "queue", "Queue "+name, d)
}

// setLimits stores the limits the form states. The form on the queue's
// page is the confirmation: it shows what is stored and what will be.
func (h *Handler) setLimits(w http.ResponseWriter, r *http.Request) {
	if !h.writable(w, r) {
		return
	}
	name := r.PathValue("name")
	form := limitsForm{
		MaxRunning: strings.TrimSpace(r.PostFormValue("max_running")), MaxRunningPerKey: strings.TrimSpace(r.PostFormValue("max_running_per_key")),
		Rate: strings.TrimSpace(r.PostFormValue("rate")), PartitionBy: strings.TrimSpace(r.PostFormValue("partition_by")),
		RatePerKey: r.PostFormValue("rate_per_key") != "", SequenceContinue: r.PostFormValue("sequence_continue") != "",
	}
	var limits pgqueue.QueueLimits // "Remove all limits" sends clear
	if r.PostFormValue("clear") == "" {
		var err error
		if limits, err = form.limits(); err != nil {
			h.refuseLimits(w, r, name, form, err)
			return
		}
	}
	err := h.client.QueueSetLimits(r.Context(), name, limits)
	switch {
	case errors.Is(err, pgqueue.ErrInvalid):
		h.refuseLimits(w, r, name, form, err)
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	default:
		http.Redirect(w, r, h.prefix+"/queue/"+url.PathEscape(name)+"?done=limits", http.StatusSeeOther)
	}
}

// refuseLimits shows the queue's page again, 400, with what was typed and
// why it was refused.
func (h *Handler) refuseLimits(w http.ResponseWriter, r *http.Request, name string, form limitsForm, refused error) {
	d, err := h.loadQueue(r.Context(), name)
	if err != nil {
		// An invalid name, say: no page to show the form on.
		h.fail(w, r, http.StatusBadRequest, refused.Error())
		return
	}
	d.Form, d.Error = form, refused.Error()
	h.render(w, r, http.StatusBadRequest, "queue", "Queue "+name, d)
}
