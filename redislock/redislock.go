package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pgqueue/pgqueue/locks"
)

var (
	_ locks.Locker = (*Locker)(nil)
	_ locks.Lock   = (*Lock)(nil)
)

// Sentinel errors. ErrBusy, ErrLost and ErrReleased are the values of
// package locks, so code written against locks matches them.
var (
	// ErrBusy is returned by TryLock when another holder has the lock, and
	// only then: a Redis that cannot be reached, or answers with an error,
	// is returned as that error.
	ErrBusy = locks.ErrBusy
	// ErrLost is the cause of a Lock's context when a renewal found the
	// key gone or taken, or no renewal got through before the lock's
	// validity (TTL less SafetyMargin) ran out.
	ErrLost = locks.ErrLost
	// ErrReleased is the cause of a Lock's context after Release.
	ErrReleased = locks.ErrReleased
	// ErrNotHeld is returned by Release when called again.
	ErrNotHeld = errors.New("redislock: lock not held")
	// ErrInvalidOption is returned by New for options out of range.
	ErrInvalidOption = errors.New("redislock: invalid option")
	// ErrExpiredOnArrival is returned by TryLock when Redis granted the
	// lock but its reply came after the acquisition's validity (TTL less
	// SafetyMargin from the sending) had ended: a slow or stalled server,
	// a hung link. The key is deleted, best effort, and no Lock is
	// returned. It is not ErrBusy: the lock may be free. Lock tries again.
	ErrExpiredOnArrival = locks.ErrExpiredOnArrival
)

// DefaultKeyPrefix starts the keys of every lock unless Options.KeyPrefix
// says otherwise.
const DefaultKeyPrefix = "pgqueue:lock:"

// Options configure a Locker. Zero fields take the defaults.
type Options struct {
	// TTL is how long the lock key lives unless renewed. Default 10s.
	TTL time.Duration
	// RenewInterval is how often a held lock is renewed. Default TTL/3.
	RenewInterval time.Duration
	// SafetyMargin is how long before the TTL runs out, by this process's
	// monotonic clock from the last successful renewal's sending, a holder
	// that could not renew counts the lock as lost. Default TTL/5.
	SafetyMargin time.Duration
	// MaxPollInterval bounds the wait between attempts of Lock, which
	// polls: it starts at 10ms and doubles up to this. Default 1s, or
	// TTL/3 when that is shorter.
	MaxPollInterval time.Duration
	// KeyPrefix starts the lock's keys. Default DefaultKeyPrefix.
	KeyPrefix string
}

// Locker is one named lock in one Redis. It is safe for concurrent use;
// each acquisition has a random token of its own, so two acquisitions
// through one Locker exclude each other.
type Locker struct {
	client   redis.Scripter
	name     string
	key      string // holds the holder's token, with the TTL
	fenceKey string // the fence counter; never expires
	opts     Options
}

// New returns the Locker of the lock name on client: a *redis.Client, or a
// *redis.ClusterClient (both keys carry the name as a hash tag, so they
// share a slot). opts may be nil. New does no I/O.
func New(client redis.Scripter, name string, opts *Options) (*Locker, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = o.TTL / 3
	}
	if o.SafetyMargin == 0 {
		o.SafetyMargin = o.TTL / 5
	}
	if o.MaxPollInterval == 0 {
		o.MaxPollInterval = min(time.Second, o.TTL/3)
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.TTL < time.Millisecond || o.RenewInterval <= 0 || o.SafetyMargin < 0 || o.MaxPollInterval <= 0 || o.RenewInterval+o.SafetyMargin >= o.TTL {
		return nil, fmt.Errorf("%w: need TTL >= 1ms and TTL > RenewInterval + SafetyMargin, got %+v", ErrInvalidOption, o)
	}
	key := o.KeyPrefix + "{" + name + "}"
	return &Locker{client: client, name: name, key: key, fenceKey: key + ":fence", opts: o}, nil
}

// Key returns the key that holds the lock; the fence counter is Key()
// plus ":fence".
func (l *Locker) Key() string { return l.key }

// Lock takes the lock, polling while another holds it, until ctx is done.
// An attempt whose grant arrived too late (ErrExpiredOnArrival) is made
// again at once, so the Lock returned is always held, never one whose
// context has ended. The Lock it returns is a *Lock.
func (l *Locker) Lock(ctx context.Context) (locks.Lock, error) {
	delay := 10 * time.Millisecond
	for {
		lock, err := l.TryLock(ctx)
		if errors.Is(err, ErrExpiredOnArrival) && ctx.Err() == nil {
			continue // granted too late to be held: the lock may be free
		}
		if !errors.Is(err, ErrBusy) {
			return lock, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("redis lock %q: %w", l.name, context.Cause(ctx))
		case <-t.C:
		}
		delay = min(2*delay, l.opts.MaxPollInterval)
	}
}

// TryLock takes the lock if it is free, with SET NX PX and a fence token
// from INCR in one script, or returns ErrBusy at once. The Lock it returns
// is a *Lock, renewed in the background until Release.
//
// A grant whose reply arrives after its validity (TTL less SafetyMargin,
// counted from the sending) is not held: TryLock deletes the key, best
// effort, and returns an error wrapping ErrExpiredOnArrival.
func (l *Locker) TryLock(ctx context.Context) (locks.Lock, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	sent := time.Now()
	fence, err := acquireScript.Run(ctx, l.client, []string{l.key, l.fenceKey}, token, l.opts.TTL.Milliseconds()).Int64()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redis lock %q: %w", l.name, ErrBusy)
	}
	if err != nil {
		return nil, fmt.Errorf("redis lock %q: %w", l.name, err)
	}
	if valid := sent.Add(l.opts.TTL - l.opts.SafetyMargin); !time.Now().Before(valid) {
		// The key may have expired and been taken by now, or live on for
		// a while: either way this process cannot count on it. Free it
		// for the next holder if it is still ours.
		_ = releaseScript.Run(ctx, l.client, []string{l.key}, token).Err()
		return nil, fmt.Errorf("redis lock %q fence %d: reply came %s after the acquisition was sent, past its validity %s: %w",
			l.name, fence, time.Since(sent).Round(time.Millisecond), l.opts.TTL-l.opts.SafetyMargin, ErrExpiredOnArrival)
	}
	lock := &Lock{l: l, token: token, fence: fence, validUntil: sent.Add(l.opts.TTL), stop: make(chan struct{}), done: make(chan struct{})}
	lock.ctx, lock.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	go lock.renew()
	return lock, nil
}

// Lock is one acquisition of a Redis lock, renewed in the background until
// Release or until it is lost.
type Lock struct {
	l      *Locker
	token  string
	fence  int64
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by Release
	done   chan struct{} // closed when renew returns
	once   sync.Once
	// validUntil is by this process's monotonic clock: when the acquire
	// was sent, plus the TTL. The renewals carry it on from there.
	validUntil time.Time
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.l.name }

// Fence returns the acquisition's token, from the lock's INCR counter.
func (l *Lock) Fence() int64 { return l.fence }

// Context is cancelled when the lock is lost (cause wraps ErrLost) or
// released (cause ErrReleased).
func (l *Lock) Context() context.Context { return l.ctx }

func (l *Lock) renew() {
	defer close(l.done)
	o := l.l.opts
	what := fmt.Sprintf("redis lock %q fence %d", l.l.name, l.fence)
	locks.KeepRenewed(l.ctx, l.stop, what, l.validUntil, o.RenewInterval, o.SafetyMargin,
		func(ctx context.Context) (time.Time, error) {
			sent := time.Now()
			n, err := renewScript.Run(ctx, l.l.client, []string{l.l.key}, l.token, o.TTL.Milliseconds()).Int64()
			switch {
			case err != nil:
				return time.Time{}, err
			case n == 0:
				return time.Time{}, fmt.Errorf("%s: key expired or taken: %w", what, ErrLost)
			}
			return sent.Add(o.TTL), nil
		}, l.cancel)
}

// Release stops the renewals and deletes the key if it still holds this
// acquisition's token. It returns an error wrapping ErrLost when the lock
// was lost first (or the key held another token), ErrNotHeld when called
// again, and Redis's error when it could not be reached.
func (l *Lock) Release(ctx context.Context) error {
	first := false
	l.once.Do(func() { close(l.stop); first = true })
	if !first {
		return fmt.Errorf("redis lock %q: %w", l.l.name, ErrNotHeld)
	}
	<-l.done
	defer l.cancel(ErrReleased)
	n, err := releaseScript.Run(ctx, l.l.client, []string{l.l.key}, l.token).Int64()
	if cause := context.Cause(l.ctx); cause != nil {
		return cause
	}
	if err != nil {
		return fmt.Errorf("redis lock %q: release: %w", l.l.name, err)
	}
	if n == 0 {
		return fmt.Errorf("redis lock %q fence %d: release found the key expired or taken: %w", l.l.name, l.fence, ErrLost)
	}
	return nil
}
