package filelock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMarker(t *testing.T) {
	t.Parallel()

	t.Run("TakeoverRaceHasOneWinner", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "8 processes racing to take over, one winning")
		const procs = 8
		dir := t.TempDir()
		path := filepath.Join(dir, "job.marker")
		writeRawMarker(t, path, markerData{
			Owner:   "dead0000dead0000dead0000dead0000",
			Expires: time.Now().Add(-time.Second).UnixNano(),
			PID:     1,
			Host:    "elsewhere",
		})
		goPath := filepath.Join(dir, "go")

		type result struct {
			out string
			err error
		}
		results := make(chan result, procs)
		for i := range procs {
			ready := filepath.Join(dir, fmt.Sprintf("ready-%d", i))
			cmd := helperCmd(os.Args[0], "marker-race", path, ready, goPath)
			go func() {
				out, err := cmd.Output()
				results <- result{strings.TrimSpace(string(out)), err}
			}()
		}
		// Start barrier: release the children only once all are waiting.
		deadline := time.Now().Add(20 * time.Second)
		for i := 0; i < procs; {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready-%d", i))); err == nil {
				i++
				continue
			}
			if time.Now().After(deadline) {
				t.Fatal("children did not get ready")
			}
			time.Sleep(time.Millisecond)
		}
		if err := os.WriteFile(goPath, nil, 0o666); err != nil {
			t.Fatal(err)
		}

		var winners []string
		busy := 0
		for range procs {
			r := <-results
			switch {
			case r.err != nil:
				t.Errorf("child: %v: %s", r.err, r.out)
			case strings.HasPrefix(r.out, "won "):
				winners = append(winners, strings.TrimPrefix(r.out, "won "))
			case r.out == "busy":
				busy++
			default:
				t.Errorf("child said %q", r.out)
			}
		}
		if len(winners) != 1 || busy != procs-1 {
			t.Fatalf("%d winners %q and %d busy, want 1 and %d", len(winners), winners, busy, procs-1)
		}
		if got := readRawMarker(t, path).Owner; got != winners[0] {
			t.Fatalf("marker owner = %q, want the winner %q", got, winners[0])
		}
	})

	t.Run("LiveMarkerIsBusy", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "live.marker")
		holder := NewMarker(path, time.Minute)
		if err := holder.TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		other := NewMarker(path, time.Minute)
		if err := other.TryAcquire(t.Context()); !errors.Is(err, ErrBusy) {
			t.Fatalf("TryAcquire of a live marker = %v, want ErrBusy", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := other.Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire of a live marker = %v, want DeadlineExceeded", err)
		}
		if other.Owner() != "" {
			t.Fatalf("Owner after failed acquires = %q, want empty", other.Owner())
		}
		if got := readRawMarker(t, path).Owner; got != holder.Owner() {
			t.Fatalf("marker owner = %q, want the holder %q", got, holder.Owner())
		}
	})

	t.Run("NonOwnerCannotReleaseOrRenew", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "owned.marker")
		first := NewMarker(path, 20*time.Millisecond)
		if err := first.TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond) // first's lease runs out
		second := NewMarker(path, time.Minute)
		if err := second.TryAcquire(t.Context()); err != nil {
			t.Fatalf("takeover of an expired marker = %v", err)
		}

		if err := first.Renew(t.Context()); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Renew by the previous owner = %v, want ErrNotOwner", err)
		}
		if err := first.Release(t.Context()); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Release by the previous owner = %v, want ErrNotOwner", err)
		}
		if err := NewMarker(path, time.Minute).Release(t.Context()); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("Release by a stranger = %v, want ErrNotOwner", err)
		}
		if first.Owner() != "" {
			t.Fatalf("previous owner still believes it holds the marker")
		}
		if got := readRawMarker(t, path).Owner; got != second.Owner() {
			t.Fatalf("marker owner = %q, want %q", got, second.Owner())
		}
	})

	t.Run("RenewExtendsLease", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "renew.marker")
		m := NewMarker(path, 30*time.Millisecond)
		if err := m.TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		before := readRawMarker(t, path)
		// Past the lease, but no one took over: the owner id proves it.
		time.Sleep(40 * time.Millisecond)
		renewing := time.Now()
		if err := m.Renew(t.Context()); err != nil {
			t.Fatalf("Renew = %v", err)
		}
		after := readRawMarker(t, path)
		// The lease runs from the renewal; how long ago that was on a
		// loaded machine is no part of the check.
		if after.Owner != before.Owner || after.Expires <= before.Expires || after.Expires < renewing.Add(30*time.Millisecond).UnixNano() {
			t.Fatalf("marker after Renew = %+v, before %+v, renewed from %d", after, before, renewing.UnixNano())
		}
		// A stranger that looks while the renewed lease runs finds it busy;
		// once it ran out (a slow machine) it may take the marker.
		looking := time.Now()
		err := NewMarker(path, time.Minute).TryAcquire(t.Context())
		if !errors.Is(err, ErrBusy) && looking.UnixNano() < after.Expires {
			t.Fatalf("TryAcquire within the renewed lease = %v, want ErrBusy", err)
		}
	})

	t.Run("ReleaseRemovesMarker", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "release.marker")
		m := NewMarker(path, time.Minute)
		if err := m.TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := m.Release(t.Context()); err != nil {
			t.Fatalf("Release = %v", err)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("marker after Release: %v", err)
		}
		if _, err := os.Stat(path + ".lock"); err != nil {
			t.Fatalf("companion lock file after Release: %v", err)
		}
		if err := m.Release(t.Context()); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("second Release = %v, want ErrNotOwner", err)
		}
		if err := NewMarker(path, time.Minute).TryAcquire(t.Context()); err != nil {
			t.Fatalf("TryAcquire after Release = %v", err)
		}
	})

	t.Run("AcquireWaitsForExpiry", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "wait.marker")
		if err := NewMarker(path, 100*time.Millisecond).TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		m := NewMarker(path, time.Minute)
		if err := m.Acquire(ctx); err != nil {
			t.Fatalf("Acquire = %v", err)
		}
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Fatalf("Acquire returned after %v, before the lease could expire", d)
		}
		if got := readRawMarker(t, path).Owner; got != m.Owner() {
			t.Fatalf("marker owner = %q, want %q", got, m.Owner())
		}
	})

	t.Run("CorruptMarkerIsStale", func(t *testing.T) {
		t.Parallel()
		path := tempPath(t, "corrupt.marker")
		if err := os.WriteFile(path, []byte("{\"own"), 0o666); err != nil {
			t.Fatal(err)
		}
		m := NewMarker(path, time.Minute)
		if err := m.TryAcquire(t.Context()); err != nil {
			t.Fatalf("TryAcquire over a corrupt marker = %v", err)
		}
		d := readRawMarker(t, path)
		host, _ := os.Hostname()
		if d.Owner != m.Owner() || len(d.Owner) != 32 || d.PID != os.Getpid() || d.Host != host {
			t.Fatalf("marker = %+v", d)
		}
	})

	t.Run("ErrorIfAlreadyHeld", func(t *testing.T) {
		t.Parallel()
		m := NewMarker(tempPath(t, "twice.marker"), time.Minute)
		if err := m.TryAcquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := m.Acquire(t.Context()); !errors.Is(err, ErrAlreadyHeld) {
			t.Fatalf("second Acquire = %v, want ErrAlreadyHeld", err)
		}
	})

	t.Run("MissingDirectoryIsNotBusy", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "missing", "x.marker")
		err := NewMarker(path, time.Minute).Acquire(t.Context())
		if errors.Is(err, ErrBusy) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Acquire = %v, want fs.ErrNotExist and not ErrBusy", err)
		}
	})

	t.Run("HolderDeathLeavesLeaseToExpire", func(t *testing.T) {
		t.Parallel()
		skipInShortMode(t, "a dead holder's lease left to expire")
		path := tempPath(t, "dead.marker")
		cmd := helperCmd(os.Args[0], "marker-hold", path, "1s")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "ready") {
			t.Fatalf("marker holder did not get ready: %q, %v", line, err)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()

		// The dead holder's lease still runs: busy. How long the kill took
		// on a loaded machine is no part of the check: a lease that ran
		// out meanwhile may be taken.
		left := readRawMarker(t, path)
		m := NewMarker(path, time.Minute)
		looking := time.Now()
		switch err := m.TryAcquire(t.Context()); {
		case err == nil && looking.UnixNano() >= left.Expires:
			return // taken once the lease ran out: what Acquire checks below
		case !errors.Is(err, ErrBusy):
			t.Fatalf("TryAcquire right after the holder died = %v, want ErrBusy", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := m.Acquire(ctx); err != nil {
			t.Fatalf("Acquire once the lease ran out = %v", err)
		}
	})

	t.Run("PanicsOnNonPositiveLease", func(t *testing.T) {
		t.Parallel()
		defer func() {
			if recover() == nil {
				t.Fatal("NewMarker with a zero lease did not panic")
			}
		}()
		NewMarker("x", 0)
	})
}

func writeRawMarker(t *testing.T, path string, d markerData) {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o666); err != nil {
		t.Fatal(err)
	}
}

func readRawMarker(t *testing.T, path string) markerData {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d markerData
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d
}
