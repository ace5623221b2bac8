package workerkit

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// TestChainObservers checks that every function of pgqueue.Observer is
// chained, the instrumentation's first, so that an Observer field added
// later cannot be silently dropped from a Setup's Observer.
func TestChainObservers(t *testing.T) {
	var calls []string
	var first, then pgqueue.Observer
	fv, tv := reflect.ValueOf(&first).Elem(), reflect.ValueOf(&then).Elem()
	typ := fv.Type()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Func {
			continue
		}
		record := func(who string) reflect.Value {
			return reflect.MakeFunc(f.Type, func([]reflect.Value) []reflect.Value {
				calls = append(calls, who+" "+f.Name)
				return nil
			})
		}
		fv.Field(i).Set(record("first"))
		tv.Field(i).Set(record("then"))
	}
	then.QueuesInterval = time.Second

	got := chainObservers(&first, &then)
	if got.QueuesInterval != time.Second {
		t.Errorf("QueuesInterval %v, want the Setup's 1s", got.QueuesInterval)
	}
	gv := reflect.ValueOf(got).Elem()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Func {
			continue
		}
		calls = nil
		args := make([]reflect.Value, f.Type.NumIn())
		for j := range args {
			args[j] = reflect.Zero(f.Type.In(j))
		}
		gv.Field(i).Call(args)
		if want := []string{"first " + f.Name, "then " + f.Name}; !slices.Equal(calls, want) {
			t.Errorf("%s called %v, want %v", f.Name, calls, want)
		}
	}

	// Without a Setup's Observer, the instrumentation's is used as it is.
	if chainObservers(&first, nil) != &first {
		t.Error("chainObservers(first, nil) is not first")
	}
	// A Setup's Observer with only some functions keeps the others'.
	only := &pgqueue.Observer{}
	calls = nil
	chainObservers(&first, only).Claimed("q", 1)
	if !slices.Equal(calls, []string{"first Claimed"}) {
		t.Errorf("Claimed with a nil Setup function called %v", calls)
	}
}
