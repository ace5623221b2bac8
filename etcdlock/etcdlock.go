package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

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
	// ErrLost is the cause of a Lock's context when its session's lease
	// expired or was revoked, or its key was deleted.
	ErrLost = locks.ErrLost
	// ErrReleased is the cause of a Lock's context after Release.
	ErrReleased = locks.ErrReleased
	// ErrNotHeld is returned by Release when called again.
	ErrNotHeld = errors.New("etcdlock: lock not held")
	// ErrInvalidOption is returned by New for options out of range.
	ErrInvalidOption = errors.New("etcdlock: invalid option")
)

// DefaultKeyPrefix starts the key prefix of every lock unless
// Options.KeyPrefix says otherwise.
const DefaultKeyPrefix = "/pgqueue/lock/"

// Options configure a Locker. Zero fields take the defaults.
type Options struct {
	// TTL is the lease of each acquisition's session, in whole seconds
	// (etcd's unit; a fraction is rounded up). The client keeps it alive
	// while the lock is held. Default 10s.
	TTL time.Duration
	// KeyPrefix starts the lock's key prefix; the name follows. Default
	// DefaultKeyPrefix.
	KeyPrefix string
}

// Locker is one named lock in one etcd cluster: a concurrency.Mutex on the
// prefix KeyPrefix+name. It is safe for concurrent use; each acquisition
// has a session (a lease) of its own, so two acquisitions through one
// Locker exclude each other.
type Locker struct {
	client *clientv3.Client
	name   string
	prefix string
	ttl    int // seconds
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
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	ttl := int((o.TTL + time.Second - 1) / time.Second)
	return &Locker{client: client, name: name, prefix: o.KeyPrefix + name, ttl: ttl}, nil
}

// Lock waits, as long as ctx allows, for the lock: etcd's mutex queues
// waiters in the order of their keys' creation and wakes the next at once
// when the holder's key goes. The Lock it returns is a *Lock.
func (l *Locker) Lock(ctx context.Context) (locks.Lock, error) { return l.lock(ctx, false) }

// TryLock takes the lock if it is free, or returns ErrBusy at once. The
// Lock it returns is a *Lock.
func (l *Locker) TryLock(ctx context.Context) (locks.Lock, error) { return l.lock(ctx, true) }

func (l *Locker) lock(ctx context.Context, try bool) (_ locks.Lock, err error) {
	// The lease is granted under ctx; the session's keep-alive must
	// outlive ctx, which bounds only the acquisition.
	lease, err := l.client.Grant(ctx, int64(l.ttl))
	if err != nil {
		return nil, fmt.Errorf("etcd lock %q: grant lease: %w", l.name, err)
	}
	session, err := concurrency.NewSession(l.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(l.ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		_, _ = l.client.Revoke(ctx, lease.ID)
		return nil, fmt.Errorf("etcd lock %q: session: %w", l.name, err)
	}
	defer func() {
		if err != nil {
			_ = session.Close() // revokes the lease, deleting a key left behind
		}
	}()
	m := concurrency.NewMutex(session, l.prefix)
	if try {
		err = m.TryLock(ctx)
		if errors.Is(err, concurrency.ErrLocked) {
			return nil, fmt.Errorf("etcd lock %q: %w", l.name, ErrBusy)
		}
	} else {
		err = m.Lock(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("etcd lock %q: %w", l.name, err)
	}
	// The fence is the create revision of this acquisition's key: the
	// mutex grants keys in that order, and revisions never go back.
	resp, err := l.client.Get(ctx, m.Key())
	if err != nil {
		return nil, fmt.Errorf("etcd lock %q: read key: %w", l.name, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("etcd lock %q: key gone right after the lock: %w", l.name, ErrLost)
	}
	lock := &Lock{name: l.name, client: l.client, session: session, m: m, fence: resp.Kvs[0].CreateRevision, stop: make(chan struct{}), done: make(chan struct{})}
	lock.ctx, lock.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(lock.ctx))
	watch := l.client.Watch(wctx, m.Key(), clientv3.WithRev(resp.Header.Revision+1))
	go lock.watch(watch, wcancel)
	return lock, nil
}

// Lock is one acquisition of an etcd lock: a key under the lock's prefix,
// on a session lease the client keeps alive until Release.
type Lock struct {
	name    string
	client  *clientv3.Client
	session *concurrency.Session
	m       *concurrency.Mutex
	fence   int64
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stop    chan struct{} // closed by Release
	done    chan struct{} // closed when watch returns
	once    sync.Once
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Fence returns the acquisition's token: the create revision of its key.
func (l *Lock) Fence() int64 { return l.fence }

// Key returns the acquisition's key in etcd. Writes to etcd itself can be
// made conditional on it in a transaction (the key's CreateRevision equal
// to Fence).
func (l *Lock) Key() string { return l.m.Key() }

// Context is cancelled when the lock is lost (cause wraps ErrLost) or
// released (cause ErrReleased).
func (l *Lock) Context() context.Context { return l.ctx }

// watch ends the lock when its session ends or its key is deleted.
func (l *Lock) watch(events clientv3.WatchChan, stopWatch context.CancelFunc) {
	defer close(l.done)
	defer stopWatch()
	for {
		select {
		case <-l.stop:
			return
		case <-l.session.Done():
			l.cancel(fmt.Errorf("etcd lock %q fence %d: session lease expired or revoked: %w", l.name, l.fence, ErrLost))
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

// Release deletes the acquisition's key and revokes its session's lease.
// It returns an error wrapping ErrLost when the lock was lost first,
// ErrNotHeld when called again, and etcd's error when it could not be
// reached (the lease then expires by itself within the TTL).
func (l *Lock) Release(ctx context.Context) error {
	first := false
	l.once.Do(func() { close(l.stop); first = true })
	if !first {
		return fmt.Errorf("etcd lock %q: %w", l.name, ErrNotHeld)
	}
	<-l.done
	defer l.cancel(ErrReleased)
	if cause := context.Cause(l.ctx); cause != nil {
		// Revoke what may be left of the lease (a deleted key's); Close
		// bounds the revoke by the TTL.
		_ = l.session.Close()
		return cause
	}
	err := l.m.Unlock(ctx)
	_ = l.session.Close()
	if err != nil {
		return fmt.Errorf("etcd lock %q: unlock: %w", l.name, err)
	}
	return nil
}
