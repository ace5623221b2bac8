package pglock

// GuardWaiters returns how many LockSession calls of this process wait
// for the process-local guard of name (see acquireGuard).
func GuardWaiters(l *Locker, name string) int {
	guards.mu.Lock()
	defer guards.mu.Unlock()
	return guards.waiting[newGuardKey(l.sessionConnConfig(), l.Key(name))]
}
