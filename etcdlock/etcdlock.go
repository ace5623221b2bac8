package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pgqueue/pgqueue/locks"
)

var (
	_ locks.Locker = (*Locker)(nil)
	_ locks.Lock   = (*Lock)(nil)
)

// Sentinel errors. ErrBusy, ErrLost and ErrReleased are the values of
// package locks, so code written against locks matches them.
var (
	// ErrBusy is returned by TryLock when another session holds the lock,
	// and only then: an etcd that cannot be reached, or answers with an
	// error, is returned as that error.
	ErrBusy = locks.ErrBusy
	// ErrLost is the cause of a Lock's context when its lease expired or
	// was revoked, its key was deleted, or no renewal got through before
	// the lease's validity (TTL less SafetyMargin) ran out.
	ErrLost = locks.ErrLost
	// ErrReleased is the cause of a Lock's context after Release.
	ErrReleased = locks.ErrReleased
	// ErrNotHeld is returned by Release when called again.
	ErrNotHeld = errors.New("etcdlock: lock not held")
	// ErrInvalidOption is returned by New for options out of range.
	ErrInvalidOption = errors.New("etcdlock: invalid option")
	// ErrExpiredOnArrival is returned by TryLock when etcd granted the
	// lock but its answers came after the lease's validity (TTL less
	// SafetyMargin from the grant's sending) had ended: a stalled server
	// or link. The lease is revoked, best effort, and no Lock is
	// returned. It is not ErrBusy: the lock may be free. Lock starts
	// again.
	ErrExpiredOnArrival = locks.ErrExpiredOnArrival
)

// DefaultKeyPrefix starts the key prefix of every lock unless
// Options.KeyPrefix says otherwise.
const DefaultKeyPrefix = "/pgqueue/lock/"

// Options configure a Locker. Zero fields take the defaults.
type Options struct {
	// TTL is the lease of each acquisition, in whole seconds (etcd's unit;
	// a fraction is rounded up, and etcd may grant more, about 2s at
	// least). The lock renews it while held. Default 10s.
	TTL time.Duration
	// RenewInterval is how often the lease is renewed, from the first
	// request of Lock or TryLock until Release. Default TTL/3.
	RenewInterval time.Duration
	// SafetyMargin is how long before the lease would end, by this
	// process's monotonic clock from the last successful renewal's
	// sending, a holder that could not renew counts the lock as lost.
	// Default TTL/5.
	SafetyMargin time.Duration
	// KeyPrefix starts the lock's key prefix; the name follows. Default
	// DefaultKeyPrefix.
	KeyPrefix string
}

// Locker is one named lock in one etcd cluster: a queue of keys under the
// prefix KeyPrefix+name+"/", one per acquisition, each bound to a lease of
// its own, granted to the key created first. It is safe for concurrent
// use; two acquisitions through one Locker exclude each other.
type Locker struct {
	client *clientv3.Client
	name   string
	prefix string // ends with "/": a name is never the prefix of another
	ttl    int    // seconds
	opts   Options
}

// New returns the Locker of the lock name on client. opts may be nil. New
// does no I/O.
func New(client *clientv3.Client, name string, opts *Options) (*Locker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.TTL < 0 {
		return nil, fmt.Errorf("%w: TTL %s", ErrInvalidOption, o.TTL)
	}
	ttl := int((o.TTL + time.Second - 1) / time.Second)
	o.TTL = time.Duration(ttl) * time.Second
	if o.RenewInterval == 0 {
		o.RenewInterval = o.TTL / 3
	}
	if o.SafetyMargin == 0 {
		o.SafetyMargin = o.TTL / 5
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.RenewInterval <= 0 || o.SafetyMargin < 0 || o.RenewInterval+o.SafetyMargin >= o.TTL {
		return nil, fmt.Errorf("%w: need TTL > RenewInterval + SafetyMargin, got %+v", ErrInvalidOption, o)
	}
	// The layout of the official client's concurrency.Mutex, so that the
	// two exclude each other on the same prefix.
	return &Locker{client: client, name: name, prefix: o.KeyPrefix + name + "/", ttl: ttl, opts: o}, nil
}

// Lock waits, as long as ctx allows, for the lock: waiters queue in the
// order of their keys' creation, and the next wakes at once when the key
// before it goes. A waiter whose lease ended while it waited (expired,
// revoked, or its validity ran out unrenewed) starts again with a new
// lease, at the end of the queue. The Lock it returns is a *Lock.
func (l *Locker) Lock(ctx context.Context) (locks.Lock, error) {
	for {
		lock, err := l.acquire(ctx, false)
		if errors.Is(err, errStartAgain) && ctx.Err() == nil {
			continue
		}
		return lock, err
	}
}

// TryLock takes the lock if it is free, or returns ErrBusy at once. The
// Lock it returns is a *Lock. A grant that arrives after the lease's
// validity is not held: TryLock revokes the lease, best effort, and
// returns an error wrapping ErrExpiredOnArrival.
func (l *Locker) TryLock(ctx context.Context) (locks.Lock, error) {
	lock, err := l.acquire(ctx, true)
	if errors.Is(err, errStartAgain) {
		return nil, fmt.Errorf("etcd lock %q: %w", l.name, ErrExpiredOnArrival)
	}
	return lock, err
}

// errStartAgain says that an acquisition's lease ended before the lock was
// granted: Lock starts again with a new one.
var errStartAgain = errors.New("lease ended before the grant")

// acquire grants a lease, starts renewing it, and queues a key on it; try
// gives up at once when another key is first.
func (l *Locker) acquire(ctx context.Context, try bool) (_ *Lock, err error) {
	sent := time.Now()
	lease, err := l.client.Grant(ctx, int64(l.ttl))
	if err != nil {
		return nil, fmt.Errorf("etcd lock %q: grant lease: %w", l.name, err)
	}
	lock := &Lock{name: l.name, client: l.client, lease: lease.ID, key: fmt.Sprintf("%s%x", l.prefix, lease.ID), ttl: time.Duration(lease.TTL) * time.Second, stop: make(chan struct{})}
	lock.ctx, lock.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	lock.wg.Go(func() { lock.renew(sent.Add(lock.ttl), l.opts) })
	defer func() {
		if err != nil {
			lock.abandon(ctx)
		}
	}()

	// Every request below ends when ctx does or the lease's validity runs
	// out, whichever comes first.
	actx, acancel := context.WithCancelCause(ctx)
	defer acancel(nil)
	defer context.AfterFunc(lock.ctx, func() { acancel(context.Cause(lock.ctx)) })()
	fail := func(what string, err error) error {
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("etcd lock %q: %w", l.name, context.Cause(ctx))
		case lock.ctx.Err() != nil:
			return fmt.Errorf("etcd lock %q: %s: %w (%w)", l.name, what, errStartAgain, context.Cause(lock.ctx))
		}
		return fmt.Errorf("etcd lock %q: %s: %w", l.name, what, err)
	}

	// Queue the key, and read the first key of the queue, in one request.
	resp, err := l.client.Txn(actx).
		If(clientv3.Compare(clientv3.CreateRevision(lock.key), "=", 0)).
		Then(clientv3.OpPut(lock.key, "", clientv3.WithLease(lease.ID)), clientv3.OpGet(l.prefix, clientv3.WithFirstCreate()...)).
		Else(clientv3.OpGet(lock.key), clientv3.OpGet(l.prefix, clientv3.WithFirstCreate()...)).
		Commit()
	if err != nil {
		return nil, fail("queue", err)
	}
	lock.fence = resp.Header.Revision
	if !resp.Succeeded {
		lock.fence = resp.Responses[0].GetResponseRange().Kvs[0].CreateRevision
	}
	rev := resp.Header.Revision
	if first := resp.Responses[1].GetResponseRange().Kvs; len(first) > 0 && first[0].CreateRevision != lock.fence {
		if try {
			return nil, fmt.Errorf("etcd lock %q: %w", l.name, ErrBusy)
		}
		if err := l.waitDeletes(actx, lock.fence-1); err != nil {
			return nil, fail("wait", err)
		}
		// The key may have gone with its lease while it waited.
		get, err := l.client.Get(actx, lock.key)
		if err != nil {
			return nil, fail("read key", err)
		}
		if len(get.Kvs) == 0 || get.Kvs[0].CreateRevision != lock.fence {
			return nil, fmt.Errorf("etcd lock %q: key gone while waiting: %w", l.name, errStartAgain)
		}
		rev = get.Header.Revision
	}
	if !lock.valid() {
		return nil, fmt.Errorf("etcd lock %q fence %d: granted after the lease's validity: %w", l.name, lock.fence, errStartAgain)
	}
	events := l.client.Watch(clientv3.WithRequireLeader(lock.ctx), lock.key, clientv3.WithRev(rev+1))
	lock.wg.Go(func() { lock.watch(events) })
	return lock, nil
}

// waitDeletes waits until no key of the lock's prefix created at or before
// maxRev is left: the waiter is then first.
func (l *Locker) waitDeletes(ctx context.Context, maxRev int64) error {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxRev))
	for {
		resp, err := l.client.Get(ctx, l.prefix, opts...)
		if err != nil {
			return err
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		if err := waitDelete(ctx, l.client, string(resp.Kvs[0].Key), resp.Header.Revision); err != nil {
			return err
		}
	}
}

// waitDelete waits for key, read at rev, to be deleted.
func waitDelete(ctx context.Context, client *clientv3.Client, key string, rev int64) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var resp clientv3.WatchResponse
	for resp = range client.Watch(wctx, key, clientv3.WithRev(rev)) {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return nil
			}
		}
	}
	if err := resp.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended before the key was deleted")
}

// Lock is one acquisition of an etcd lock: a key under the lock's prefix,
// on a lease of its own that the Lock renews until Release.
type Lock struct {
	name   string
	client *clientv3.Client
	lease  clientv3.LeaseID
	key    string
	ttl    time.Duration // as granted
	fence  int64
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Release
	wg     sync.WaitGroup
	once   sync.Once

	mu         sync.Mutex
	validUntil time.Time // less the margin; by the monotonic clock
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Fence returns the acquisition's token: the create revision of its key.
func (l *Lock) Fence() int64 { return l.fence }

// Key returns the acquisition's key in etcd. Writes to etcd itself can be
// made conditional on it in a transaction (the key's CreateRevision equal
// to Fence).
func (l *Lock) Key() string { return l.key }

// Context is cancelled when the lock is lost (cause wraps ErrLost) or
// released (cause ErrReleased).
func (l *Lock) Context() context.Context { return l.ctx }

// renew keeps the lease until Release, or until it is lost: a renewal
// finds it gone, or none got through before its validity ran out, however
// long a renewal hangs.
func (l *Lock) renew(validUntil time.Time, o Options) {
	l.setValid(validUntil.Add(-o.SafetyMargin))
	what := fmt.Sprintf("etcd lock %q lease %x", l.name, l.lease)
	locks.KeepRenewed(l.ctx, l.stop, what, validUntil, o.RenewInterval, o.SafetyMargin,
		func(ctx context.Context) (time.Time, error) {
			sent := time.Now()
			resp, err := l.client.KeepAliveOnce(clientv3.WithRequireLeader(ctx), l.lease)
			switch {
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				return time.Time{}, fmt.Errorf("%s: lease expired or revoked: %w", what, ErrLost)
			case err != nil:
				return time.Time{}, err
			}
			until := sent.Add(time.Duration(resp.TTL) * time.Second)
			l.extend(until.Add(-o.SafetyMargin))
			return until, nil
		}, l.cancel)
}

func (l *Lock) setValid(t time.Time) {
	l.mu.Lock()
	l.validUntil = t
	l.mu.Unlock()
}

// extend moves the validity on to t, unless it has ended already: a
// renewal that got through too late saves nothing (KeepRenewed counts the
// lock lost then).
func (l *Lock) extend(t time.Time) {
	l.mu.Lock()
	if time.Now().Before(l.validUntil) {
		l.validUntil = t
	}
	l.mu.Unlock()
}

// valid reports whether the lease is still within its validity.
func (l *Lock) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ctx.Err() == nil && time.Now().Before(l.validUntil)
}

// watch ends the lock when its key is deleted, or the watch ends.
func (l *Lock) watch(events clientv3.WatchChan) {
	for {
		select {
		case <-l.stop:
			return
		case <-l.ctx.Done():
			return
		case resp, ok := <-events:
			if !ok || resp.Canceled {
				// The watch ended without Release: the lock can no longer
				// be known to be held.
				l.cancel(fmt.Errorf("etcd lock %q fence %d: watch ended (%v): %w", l.name, l.fence, resp.Err(), ErrLost))
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					l.cancel(fmt.Errorf("etcd lock %q fence %d: key deleted: %w", l.name, l.fence, ErrLost))
					return
				}
			}
		}
	}
}

// abandon stops an acquisition that was not granted and revokes its
// lease, which deletes its key, best effort: bounded by the TTL, after
// which the lease has expired anyway.
func (l *Lock) abandon(ctx context.Context) {
	close(l.stop)
	l.wg.Wait()
	l.cancel(ErrReleased)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
	defer cancel()
	_, _ = l.client.Revoke(rctx, l.lease)
}

// Release revokes the acquisition's lease, which deletes its key. It
// returns an error wrapping ErrLost when the lock was lost first,
// ErrNotHeld when called again, and etcd's error when it could not be
// reached (the lease then expires by itself within the TTL).
func (l *Lock) Release(ctx context.Context) error {
	first := false
	l.once.Do(func() { close(l.stop); first = true })
	if !first {
		return fmt.Errorf("etcd lock %q: %w", l.name, ErrNotHeld)
	}
	l.wg.Wait()
	defer l.cancel(ErrReleased)
	if cause := context.Cause(l.ctx); cause != nil {
		// Revoke what may be left of the lease (a deleted key's).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.ttl)
		defer cancel()
		_, _ = l.client.Revoke(rctx, l.lease)
		return cause
	}
	_, err := l.client.Revoke(ctx, l.lease)
	switch {
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("etcd lock %q fence %d: release found the lease gone: %w", l.name, l.fence, ErrLost)
	case err != nil:
		return fmt.Errorf("etcd lock %q: release: %w", l.name, err)
	}
	return nil
}
