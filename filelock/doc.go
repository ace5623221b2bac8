// Package filelock provides advisory locks between processes on one host,
// kept in files: [Lock], a shared or exclusive lock on a whole file;
// [Fenced], an exclusive lock with fence tokens that implements package
// locks' Locker; and [Marker], a lease whose holder is named inside a
// marker file.
//
// For locks that must hold across hosts, use the PostgreSQL locks of
// package pglock, or the Redis and etcd modules; docs/guides/locking.md compares
// them.
//
// # Lock
//
// On Unix a [Lock] is a flock(2) lock; on Windows it is a LockFileEx lock on
// the byte range from offset 0 of length 2^64-1, which stands for the whole
// file. The lock belongs to the open file (the open file description on
// Unix, the handle on Windows), not to the process: every acquisition opens
// the file again, so two Lock values for one path exclude each other even in
// one process. Files are opened close-on-exec (not inheritable, on Windows),
// so child processes do not inherit locks.
//
// The blocking forms, [Lock.Lock] and [Lock.RLock], poll with non-blocking
// attempts, sleeping 1ms at first and doubling up to 50ms between attempts,
// so that a done context always ends the wait. Polling is not fair: waiters
// are served in no particular order, and shared holders that keep
// overlapping can starve an exclusive waiter.
//
// The lock file is opened read-write (created with mode 0o666 before umask)
// for shared and exclusive locks alike: a process that may not write the lock
// file may not lock it. It is never deleted, not even by Unlock. Deleting it
// would let two holders exist at once: a waiter that opened the old file
// would lock the unlinked inode while a newcomer created and locked a new file
// at the same path. Keep lock files in a directory that no cleaner sweeps, and
// write nothing into them (a [Fenced] holder writes its counter there itself) (on Windows other handles cannot write a locked
// lock file, nor read it while the lock is exclusive).
//
// When a holder dies, however it dies, the kernel drops its lock as soon as
// the last descriptor of the open file is closed, which process exit does.
// Nothing needs cleaning up, and no lock outlives its holder.
//
// # Errors
//
// Every error is an [*fs.PathError] naming the file, so errors.Is and
// errors.As see through it. [ErrBusy] means that another holder has the lock,
// and nothing else: a permission error, a missing directory or an I/O error is
// returned as itself, so errors.Is(err, fs.ErrPermission) and
// errors.Is(err, fs.ErrNotExist) work. A failed attempt closes the file it
// opened.
//
// # Fenced
//
// A [Fenced] lock is an exclusive [Lock] whose file holds a decimal
// counter: each acquisition reads it, writes it back plus one and fsyncs
// the file, through the descriptor that holds the lock, before handing the
// new value out as the acquisition's fence token. A new or empty file
// starts at the clock in microseconds, so a deleted lock file's successor
// still hands out higher tokens. A [FencedLock] checks every
// CheckInterval that its path still names the file it locked; if the file
// was deleted or replaced, another process may lock the new one, and the
// lock's context ends with locks.ErrLost. Fence the writes made under it
// (pglock.CheckFenceTx does for PostgreSQL).
//
// # Marker
//
// A [Marker] holds the marker file at its path while its lease lasts. The
// file records a random owner id (128 bits from crypto/rand, in hex), the
// lease expiry in Unix nanoseconds, and the holder's pid and hostname. A
// marker whose lease has expired is stale, and [Marker.Acquire] takes it
// over.
//
// Taking over a stale marker means reading it, seeing that it expired, and
// replacing it; done plainly, two processes could both see it expired and
// both replace it, each believing it won. O_CREATE|O_EXCL only covers the
// case where no file exists, and link or rename tricks that move the stale
// file aside first leave debris and still need care to tell whose rename won.
// Instead every read-check-write (acquire, takeover, renew and release) holds
// an exclusive [Lock] on the companion file path+".lock" for the few file
// operations it takes, so those steps are serialised among all processes:
// when N processes race to take over one stale marker, the first in sees it
// expired and replaces it, and the others see a live marker and get
// [ErrBusy]. The kernel drops the companion lock of a process that dies
// mid-step, so a crash never wedges the marker. The new marker is written to
// path+".tmp" and renamed over path, so the marker file appears whole and at
// once, and a marker that does not parse is treated as expired.
//
// The limits:
//   - Markers are advisory: they bind only processes that use this package
//     on the same paths.
//   - Same host only, and not on network file systems (NFS, SMB), where
//     flock may be emulated or local to one client, and rename and clocks
//     are not shared.
//   - Leases compare wall clocks (time.Now) of processes on the same host.
//     A step of the system clock shortens or lengthens every lease.
//   - A holder that pauses past its lease (a stopped process, a long GC
//     pause, a suspended machine) can be taken over while it still believes
//     it holds the marker. Holders must call [Marker.Renew] well within the
//     lease and stop work when it returns an error. Nothing fences writes
//     made by a holder that lost its lease; PostgreSQL leases with fencing
//     tokens do that.
//   - A dead holder's marker stays until its lease expires.
//   - Release removes the marker but leaves path+".lock" in place, for the
//     reason given above for lock files.
package filelock
