package enqueue

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue/pgqueuetype"
)

func TestWorkflowGraph(t *testing.T) {
	at := func(i int) Dep { return Dep{Index: i} }
	named := func(name string) Dep { return Dep{Index: -1, Name: name} }
	id := func(n int64) Dep { return Dep{JobID: n, Index: -1} }
	for _, tc := range []struct {
		name string
		jobs []wfJob
		want error
		// msg is in the error; for a cycle, the job it names.
		msg string
	}{
		{"Diamond", []wfJob{{}, {deps: []Dep{at(0)}}, {deps: []Dep{at(0)}}, {deps: []Dep{at(1), at(2)}}}, nil, ""},
		{"ByNameAndID", []wfJob{{name: "a"}, {deps: []Dep{named("a"), id(7)}}}, nil, ""},
		{"ChildBeforeParent", []wfJob{{deps: []Dep{at(1)}}, {}}, nil, ""},
		{"Cycle", []wfJob{{}, {deps: []Dep{at(3)}}, {deps: []Dep{at(1)}}, {deps: []Dep{at(2)}}}, pgqueuetype.ErrDependencyCycle, "job "},
		{"CycleBehindAJob", []wfJob{{deps: []Dep{at(1)}}, {deps: []Dep{at(2)}}, {deps: []Dep{at(1)}}}, pgqueuetype.ErrDependencyCycle, "job "},
		{"Self", []wfJob{{name: "x", deps: []Dep{named("x")}}}, pgqueuetype.ErrDependencyCycle, "job 0"},
		{"UnknownName", []wfJob{{deps: []Dep{named("nobody")}}}, pgqueuetype.ErrDependencyNotFound, `"nobody"`},
		{"PositionOutside", []wfJob{{deps: []Dep{at(1)}}}, pgqueuetype.ErrDependencyNotFound, "position 1"},
		{"DuplicateName", []wfJob{{name: "a"}, {name: "a"}}, pgqueuetype.ErrInvalid, `name "a"`},
		{"TwiceTheSameParent", []wfJob{{}, {deps: []Dep{at(0), at(0)}}}, pgqueuetype.ErrInvalid, "twice"},
		{"TwiceTheSameID", []wfJob{{deps: []Dep{id(3), id(3)}}}, pgqueuetype.ErrInvalid, "twice"},
		{"NothingNamed", []wfJob{{deps: []Dep{{Index: -1}}}}, pgqueuetype.ErrInvalid, "exactly one"},
		{"TwoThingsNamed", []wfJob{{name: "a"}, {deps: []Dep{{JobID: 1, Index: 0}}}}, pgqueuetype.ErrInvalid, "exactly one"},
		{"UnknownPolicy", []wfJob{{}, {deps: []Dep{{Index: 0, OnFailure: "retry"}}}}, pgqueuetype.ErrInvalid, "policy"},
		{"TooManyParents", []wfJob{{deps: make([]Dep, MaxJobDependencies+1)}}, pgqueuetype.ErrWorkflowLimit, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edges, err := resolveDeps(tc.jobs)
			if err == nil {
				_, err = topoOrder(len(tc.jobs), edges)
			}
			if !errors.Is(err, tc.want) || (err != nil && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("error %v, want %v with %q", err, tc.want, tc.msg)
			}
		})
	}
}

// The order puts every job after the jobs of the batch it depends on, and
// a cycle's error names a job on the cycle, not one merely behind it.
func TestWorkflowOrder(t *testing.T) {
	jobs := []wfJob{{deps: []Dep{{Index: 2}}}, {deps: []Dep{{Index: 0}, {Index: 2}}}, {}, {deps: []Dep{{Index: 1}}}}
	edges, err := resolveDeps(jobs)
	if err != nil {
		t.Fatal(err)
	}
	order, err := topoOrder(len(jobs), edges)
	if err != nil {
		t.Fatal(err)
	}
	pos := make([]int, len(order))
	for k, i := range order {
		pos[i] = k
	}
	for i, es := range edges {
		for _, e := range es {
			if pos[e.parent] > pos[i] {
				t.Fatalf("order %v puts job %d before its parent %d", order, i, e.parent)
			}
		}
	}

	// 0 waits for 1, which is on the cycle 1 → 2 → 1.
	jobs = []wfJob{{deps: []Dep{{Index: 1}}}, {deps: []Dep{{Index: 2}}}, {deps: []Dep{{Index: 1}}}}
	edges, err = resolveDeps(jobs)
	if err != nil {
		t.Fatal(err)
	}
	_, err = topoOrder(len(jobs), edges)
	if !errors.Is(err, pgqueuetype.ErrDependencyCycle) || strings.HasPrefix(err.Error(), "job 0:") {
		t.Fatalf("cycle error %v: want job 1 or 2 named", err)
	}
}

// TestWorkflowSequenceOrder: in a batch with sequence keys every job comes
// after the jobs of the batch it depends on; without them, any order.
func TestWorkflowSequenceOrder(t *testing.T) {
	forward := []wfJob{{deps: []Dep{{Index: 2}}}, {}, {deps: []Dep{{Index: 1}}}}
	backward := []wfJob{{}, {deps: []Dep{{Index: 0}}}, {deps: []Dep{{Index: 1}}}}
	for _, tc := range []struct {
		name    string
		jobs    []wfJob
		seq     int // the job given a sequence key; -1 for none
		refused bool
	}{
		{"ForwardWithSequence", forward, 1, true},
		{"ForwardWithoutSequence", forward, -1, false},
		{"BackwardWithSequence", backward, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs := slices.Clone(tc.jobs)
			if tc.seq >= 0 {
				jobs[tc.seq].sequence = true
			}
			edges, err := resolveDeps(jobs)
			if err != nil {
				t.Fatal(err)
			}
			err = checkSequenceOrder(jobs, edges)
			if refused := errors.Is(err, pgqueuetype.ErrInvalid); refused != tc.refused || (err != nil) != tc.refused {
				t.Fatalf("err %v, want refused %v", err, tc.refused)
			}
		})
	}
}
