package etcdlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pgqueue/pgqueue/etcdlock"
	"github.com/pgqueue/pgqueue/locks"
)

// TestStoppedServerEndsContextByLeaseEnd holds a lock and then stops etcd
// with SIGSTOP: its connections stay open and nothing answers, so the
// renewals hang. The holder cannot tell a stopped server from one cut off
// while the rest of the cluster goes on and expires its lease, so its
// context must end by the lease's end less the safety margin, counted from
// the last renewal sent, which was before the stop.
//
// The margin is wide (half the TTL) so that the bound is also below the
// earliest end the client's own keep-alive would give (two thirds of the
// TTL after the stop: it renews every third of the TTL and gives up a TTL
// after the last answer), which is what the test tells apart.
func TestStoppedServerEndsContextByLeaseEnd(t *testing.T) {
	t.Parallel()
	s := privateEtcd(t)
	ctx := t.Context()
	const ttl, margin = 4 * time.Second, 2 * time.Second
	l, err := etcdlock.New(s.client(t), t.Name(), &etcdlock.Options{TTL: ttl, RenewInterval: 200 * time.Millisecond, SafetyMargin: margin})
	if err != nil {
		t.Fatal(err)
	}
	held, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a few renewals
	ended := make(chan time.Time, 1)
	go func() {
		<-held.Context().Done()
		ended <- time.Now()
	}()
	stopped := time.Now()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	defer s.cont()
	var end time.Time
	select {
	case end = <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the holder's context did not end 20s after etcd stopped")
	}
	// 300ms is the scheduler's slack.
	t.Logf("etcd stopped at 0; the holder's context ended at %s (validity at most %s)", end.Sub(stopped).Round(time.Millisecond), ttl-margin)
	if end.Sub(stopped) > ttl-margin+300*time.Millisecond {
		t.Errorf("the holder's context ended %s after etcd stopped, past the lease's end less the margin (at most %s)",
			end.Sub(stopped).Round(time.Millisecond), ttl-margin)
	}
	if cause := context.Cause(held.Context()); !errors.Is(cause, locks.ErrLost) {
		t.Errorf("cause = %v, want ErrLost", cause)
	}
	if err := s.cont(); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); !errors.Is(err, locks.ErrLost) {
		t.Errorf("Release = %v, want ErrLost", err)
	}
}

// TestWaiterOutlivedByItsLeaseStartsAgain waits in Lock behind a holder and
// has the waiter's lease end meanwhile (revoked here, as etcd does to an
// expired one), which deletes its place in the queue. Once the holder
// releases, Lock must start again with a new lease and get the lock, not
// fail with the client's "session is expired".
func TestWaiterOutlivedByItsLeaseStartsAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := shared.client(t)
	l := newLocker(t, c, t.Name(), 3*time.Second)
	holder, err := l.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		lock locks.Lock
		err  error
	}
	got := make(chan result, 1)
	go func() {
		lock, err := l.Lock(ctx)
		got <- result{lock, err}
	}()

	// The waiter's key is the one after the holder's.
	prefix := etcdlock.DefaultKeyPrefix + t.Name() + "/"
	var waiter clientv3.LeaseID
	for waiter == 0 {
		resp, err := c.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) >= 2 {
			waiter = clientv3.LeaseID(resp.Kvs[1].Lease)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := c.Revoke(ctx, waiter); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past a renewal of the waiter's lease
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("Lock did not return after the holder released")
	}
	if r.err != nil {
		t.Fatalf("Lock = %v, want the lock", r.err)
	}
	defer r.lock.Release(ctx)
	if err := r.lock.Context().Err(); err != nil {
		t.Fatalf("Lock returned a Lock whose context has ended: %v", context.Cause(r.lock.Context()))
	}
	if r.lock.Fence() <= holder.Fence() {
		t.Errorf("fence %d, want > %d", r.lock.Fence(), holder.Fence())
	}
}

// TestStalledGrantIsNotHeld sends TryLock to a stopped etcd and resumes it
// after the lease's validity: the grant arrives too late for this process
// to count on the lease (it cannot tell when etcd granted it), so TryLock
// returns ErrExpiredOnArrival, not a Lock and not ErrBusy, and leaves the
// lock free.
func TestStalledGrantIsNotHeld(t *testing.T) {
	t.Parallel()
	s := privateEtcd(t)
	ctx := t.Context()
	l, err := etcdlock.New(s.client(t), t.Name(), &etcdlock.Options{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	defer s.cont()
	type result struct {
		lock locks.Lock
		err  error
	}
	got := make(chan result, 1)
	go func() {
		lock, err := l.TryLock(ctx)
		got <- result{lock, err}
	}()
	time.Sleep(2500 * time.Millisecond) // past the validity, 1.6s
	if err := s.cont(); err != nil {
		t.Fatal(err)
	}
	var r result
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("TryLock did not return")
	}
	if r.err == nil {
		t.Errorf("TryLock granted after its validity returned a Lock (context error %v)", context.Cause(r.lock.Context()))
		_ = r.lock.Release(ctx)
	} else if !errors.Is(r.err, etcdlock.ErrExpiredOnArrival) || errors.Is(r.err, etcdlock.ErrBusy) {
		t.Errorf("TryLock = %v, want ErrExpiredOnArrival (and not ErrBusy)", r.err)
	}
	again, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the late grant = %v", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
