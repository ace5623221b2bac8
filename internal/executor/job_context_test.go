package executor

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

type testKey struct{}

// A job's context finds its job and its executor's owner, also from a
// context derived from it, and passes other keys on to its parent.
func TestJobContext(t *testing.T) {
	e := New(Config{Jobs: context.Background(), Owner: "the client"})
	j := &ActiveJob{}
	ctx := withJob(context.WithValue(context.Background(), testKey{}, "parent's"), j, e)
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	if got := JobFromContext(derived); got != j {
		t.Fatalf("JobFromContext = %p, want the job %p", got, j)
	}
	if got := JobFromContext(derived).Owner(); got != "the client" {
		t.Errorf("Owner = %v, want the executor's", got)
	}
	if got := derived.Value(testKey{}); got != "parent's" {
		t.Errorf("Value of another key = %v, want the parent's", got)
	}
	if got := JobFromContext(context.Background()); got != nil {
		t.Errorf("JobFromContext outside a job = %p, want nil", got)
	}
	if got := (&ActiveJob{}).Owner(); got != nil {
		t.Errorf("Owner of a job no executor runs = %v, want nil", got)
	}
}

// A control message cancels the job it names under its fence, once, and
// nothing else.
func TestHandleControl(t *testing.T) {
	a := NewActiveJobs()
	var causes []error
	row := &pgqueuetype.JobRow{ID: 1, Fence: 2}
	j := a.Add(row, func(err error) { causes = append(causes, err) }, time.Now(), time.Minute)
	log := slog.New(slog.DiscardHandler)
	a.HandleControl(`{"op":"cancel","id":1,"fence":1}`, log) // an older claim's
	a.HandleControl(`{"op":"cancel","id":3,"fence":2}`, log) // another job
	a.HandleControl(`{"op":"pause","id":1,"fence":2}`, log)  // not known here
	a.HandleControl(`not json`, log)
	if len(causes) != 0 || j.CancelRequested() {
		t.Fatalf("cancelled by messages for others: %v", causes)
	}
	a.HandleControl(`{"op":"cancel","id":1,"fence":2}`, log)
	a.HandleControl(`{"op":"cancel","id":1,"fence":2}`, log)
	if len(causes) != 1 || !errors.Is(causes[0], pgqueuetype.ErrJobCancelled) || !j.CancelRequested() {
		t.Fatalf("causes %v, want one ErrJobCancelled", causes)
	}
}
