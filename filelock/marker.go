package filelock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"
)

// Marker is a lease held as a file: while a process holds it, the file at its
// path exists and names that process's owner id, pid, hostname and lease
// expiry. It suits work that must not run twice on one host at a time but
// should be picked up again when its holder dies, with no process left
// holding a descriptor. Create it with [NewMarker]; the zero value is not
// usable.
//
// Every read-check-write of the marker (acquire, takeover, renew, release)
// runs under an exclusive [Lock] on the companion file path+".lock", held
// only for those few file operations. New content goes to path+".tmp" and is
// renamed over path, so readers never see a partial marker. See the package
// documentation for why this protocol was chosen, and for its limits.
//
// A Marker is meant to be used by one goroutine at a time; concurrent calls
// are serialised, and the wait for a turn ends when the caller's ctx is done.
type Marker struct {
	path  string
	lease time.Duration

	turn chan struct{} // one slot; whoever fills it may run an operation

	mu    sync.Mutex
	owner string // our owner id while we believe we hold the marker
}

// markerData is the marker file's content, as JSON.
type markerData struct {
	Owner   string `json:"owner"`
	Expires int64  `json:"expires_unix_nano"` // wall clock of the writer
	PID     int    `json:"pid"`
	Host    string `json:"host"`
}

// NewMarker returns a Marker for the file at path whose acquisitions and
// renewals last lease. It panics if lease is not positive. NewMarker does no
// I/O.
func NewMarker(path string, lease time.Duration) *Marker {
	if lease <= 0 {
		panic("filelock: NewMarker: non-positive lease")
	}
	return &Marker{path: path, lease: lease, turn: make(chan struct{}, 1)}
}

// Acquire creates the marker, or takes it over if its lease has expired,
// waiting while another owner holds a live one. It polls, so waiters are
// served in no particular order. When ctx is done first it returns an error
// that wraps ctx.Err(). On success the lease runs until the lease duration
// from now; call [Marker.Renew] before it ends.
func (m *Marker) Acquire(ctx context.Context) error {
	return m.acquire(ctx, true)
}

// TryAcquire is [Marker.Acquire] without the wait for a live marker: it
// returns an error that wraps [ErrBusy] when another owner holds one. ctx
// bounds only the wait for the companion lock, which others hold for a few
// file operations at a time.
func (m *Marker) TryAcquire(ctx context.Context) error {
	return m.acquire(ctx, false)
}

// Renew extends the lease to the lease duration from now, provided the marker
// still names this Marker's owner id; it does even after the lease ran out,
// since the id proves no one else held the marker in between. Otherwise it
// returns an error that wraps [ErrNotOwner] and the Marker no longer
// considers itself the holder. A holder must check Renew's result before
// doing more work under the marker.
func (m *Marker) Renew(ctx context.Context) error {
	return m.withTurn(ctx, "renew", func(owner string) error {
		if owner == "" {
			return ErrNotOwner
		}
		return m.guarded(ctx, "renew", func() error {
			if ok, err := ownedBy(m.path, owner); !ok || err != nil {
				if err != nil {
					return err
				}
				m.setOwner("")
				return ErrNotOwner
			}
			return m.writeMarker(owner)
		})
	})
}

// Release removes the marker, provided it still names this Marker's owner id;
// otherwise it leaves the file alone and returns an error that wraps
// [ErrNotOwner]. Either way the Marker is no longer the holder afterwards,
// unless the file could not be read or removed. The companion file
// path+".lock" stays in place, as does a path+".tmp" left by a crash.
func (m *Marker) Release(ctx context.Context) error {
	return m.withTurn(ctx, "release", func(owner string) error {
		if owner == "" {
			return ErrNotOwner
		}
		return m.guarded(ctx, "release", func() error {
			if ok, err := ownedBy(m.path, owner); !ok || err != nil {
				if err != nil {
					return err
				}
				m.setOwner("")
				return ErrNotOwner
			}
			if err := os.Remove(m.path); err != nil {
				return err
			}
			m.setOwner("")
			return nil
		})
	})
}

// Owner returns the random owner id written into the marker by the last
// successful acquisition, or "" when the Marker does not hold it. It reports
// what this Marker believes; [Marker.Renew] and [Marker.Release] check the
// file.
func (m *Marker) Owner() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owner
}

func (m *Marker) acquire(ctx context.Context, wait bool) error {
	return m.withTurn(ctx, "acquire", func(owner string) error {
		if owner != "" {
			return ErrAlreadyHeld
		}
		owner = newOwnerID()
		delay := minPollDelay
		for {
			err := m.guarded(ctx, "acquire", func() error {
				cur, err := readMarker(m.path)
				switch {
				case err == nil:
					// An unparsable marker counts as expired: markers
					// written by this package appear whole, by rename, so
					// none can belong to a live holder.
					if time.Now().UnixNano() < cur.Expires {
						return ErrBusy
					}
				case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errCorrupt):
					return err
				}
				if err := m.writeMarker(owner); err != nil {
					return err
				}
				m.setOwner(owner)
				return nil
			})
			if !wait || !errors.Is(err, ErrBusy) {
				return err
			}
			if err := sleep(ctx, delay); err != nil {
				return err
			}
			delay = min(2*delay, maxPollDelay)
		}
	})
}

// withTurn runs fn as the only operation in progress on m, passing it the
// current owner id, and wraps a bare error from fn in an *fs.PathError.
func (m *Marker) withTurn(ctx context.Context, op string, fn func(owner string) error) error {
	select {
	case m.turn <- struct{}{}:
	case <-ctx.Done():
		return &fs.PathError{Op: op, Path: m.path, Err: ctx.Err()}
	}
	defer func() { <-m.turn }()
	err := fn(m.Owner())
	var pe *fs.PathError
	if err != nil && !errors.As(err, &pe) {
		err = &fs.PathError{Op: op, Path: m.path, Err: err}
	}
	return err
}

// guarded runs fn under the exclusive companion lock that makes every
// read-check-write of the marker atomic with respect to other processes.
func (m *Marker) guarded(ctx context.Context, op string, fn func() error) error {
	g := New(m.path + ".lock")
	if err := g.Lock(ctx); err != nil {
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			// The caller's deadline, not a fault of the companion file:
			// report it against the marker.
			return &fs.PathError{Op: op, Path: m.path, Err: cerr}
		}
		return err
	}
	err := fn()
	if uerr := g.Unlock(); err == nil {
		err = uerr
	}
	return err
}

func (m *Marker) setOwner(owner string) {
	m.mu.Lock()
	m.owner = owner
	m.mu.Unlock()
}

// writeMarker replaces the marker with one naming owner and a fresh lease.
// The caller holds the companion lock, which is what makes the fixed temp
// name safe. There is no fsync: after an OS crash every holder is gone, and a
// torn marker reads as expired.
func (m *Marker) writeMarker(owner string) error {
	host, _ := os.Hostname() // informational only
	b, err := json.Marshal(markerData{
		Owner:   owner,
		Expires: time.Now().Add(m.lease).UnixNano(),
		PID:     os.Getpid(),
		Host:    host,
	})
	if err != nil {
		return err
	}
	tmp := m.path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o666); err != nil {
		return err
	}
	if err := os.Rename(tmp, m.path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// errCorrupt marks a marker file that exists but does not parse.
var errCorrupt = errors.New("filelock: corrupt marker")

// ownedBy reports whether the marker at path names owner. A missing or
// unparsable marker names no one.
func ownedBy(path, owner string) (bool, error) {
	cur, err := readMarker(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errCorrupt) {
		return false, nil
	}
	return err == nil && cur.Owner == owner, err
}

func readMarker(path string) (markerData, error) {
	var d markerData
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil || d.Owner == "" {
		return d, errCorrupt
	}
	return d, nil
}

func newOwnerID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails since Go 1.24
	return hex.EncodeToString(b[:])
}
