package blobtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
)

// park installs a hook (through set) that stops the first call reaching it
// until release is closed; parked is closed when that call arrives.
func park(t *testing.T, set func(func(string))) (parked, release chan struct{}) {
	t.Helper()
	parked, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	set(func(string) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(parked)
			<-release
		}
	})
	t.Cleanup(func() { set(nil) })
	return parked, release
}

// crashWaits makes testHookCrashWaits close the returned channel.
func crashWaits(t *testing.T) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	testHookCrashWaits = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(func() { testHookCrashWaits = nil })
	return ch
}

// waitFor waits for ch; the bound only turns a hang into a failure naming
// what never happened.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatal(what)
	}
}

// TestCrashKeepsConcurrentSync is finding 6 of issue 12, the Sync half: a
// Sync whose fdatasync had returned but whose size was not yet recorded
// when Crash began (Crash swapped the file map first, so the size went
// into the new map and was lost) returned nil for bytes the crash then
// dropped. Now the Sync is in flight, Crash waits for it, and its bytes
// survive.
func TestCrashKeepsConcurrentSync(t *testing.T) {
	ctx := context.Background()
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFaulty(d)
	af, err := f.Bucket().OpenAppend(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write([]byte("synced")); err != nil {
		t.Fatal(err)
	}
	parked, release := park(t, func(h func(string)) { testHookSynced = h })
	synced := make(chan error, 1)
	go func() { synced <- af.Sync() }()
	<-parked
	waiting := crashWaits(t)
	crashed := make(chan error, 1)
	go func() { crashed <- f.Crash() }()
	waitFor(t, waiting, "Crash never waited for the Sync in flight")
	close(release)
	syncErr := <-synced
	if err := <-crashed; err != nil {
		t.Fatalf("Crash: %v", err)
	}
	if syncErr != nil && !errors.Is(syncErr, ErrCrashed) {
		t.Fatalf("Sync: %v", syncErr)
	}
	got, err := blob.NewBucket(d).ReadAll(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if syncErr == nil && string(got) != "synced" {
		t.Fatalf("Sync returned nil, then the crash left %q: the synced bytes were dropped", got)
	}
}

// TestCrashPutNotAfter is finding 6, the Put half: a Put past its crash
// check completed after Crash had returned, changing a store whose process
// was dead. Now Crash waits for it (and ends its context), and its result
// tells the truth about whether the object is there.
func TestCrashPutNotAfter(t *testing.T) {
	ctx := context.Background()
	inner := mem.NewDriver()
	f := NewFaulty(inner)
	parked, release := park(t, func(h func(string)) { testHookPutChecked = h })
	waits := crashWaits(t)
	put := make(chan error, 1)
	go func() {
		_, err := f.Bucket().Put(ctx, "k", []byte("v"), nil)
		put <- err
	}()
	<-parked
	crashed := make(chan error, 1)
	go func() { crashed <- f.Crash() }()
	returnedFirst := false
	select {
	case err := <-crashed:
		returnedFirst = true
		crashed <- err
	case <-waits:
	}
	close(release)
	putErr := <-put
	if err := <-crashed; err != nil {
		t.Fatalf("Crash: %v", err)
	}
	_, statErr := inner.Stat(ctx, "k")
	stored := statErr == nil
	if returnedFirst && stored {
		t.Fatalf("Crash returned while a Put was in flight, and the Put then stored its object (Put: %v)", putErr)
	}
	if (putErr == nil) != stored {
		t.Fatalf("Put returned %v, and the object is stored: %v", putErr, stored)
	}
	if putErr != nil && !errors.Is(putErr, ErrCrashed) {
		t.Fatalf("Put interrupted by the crash: %v, want ErrCrashed", putErr)
	}
	// Nothing gets in afterwards.
	if _, err := f.Put(ctx, "k2", nil, 0, blob.PutOptions{}); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Put after the crash: %v", err)
	}
}

// TestCrashDoesNotWaitForBlockedCalls: a call parked by a rule has not begun,
// so Crash does not wait for it; it fails when released.
func TestCrashDoesNotWaitForBlockedCalls(t *testing.T) {
	ctx := context.Background()
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFaulty(d)
	b := f.Bucket()
	af, err := b.OpenAppend(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write([]byte("unsynced")); err != nil {
		t.Fatal(err)
	}
	arrived, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.Add(Rule{Op: OpSync, Wait: unblock, Match: func(Call) bool { once.Do(func() { close(arrived) }); return true }})
	release := func() { close(unblock) }
	synced := make(chan error, 1)
	go func() { synced <- af.Sync() }()
	waitFor(t, arrived, "the Sync never reached the driver")
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-synced; !errors.Is(err, ErrCrashed) {
		t.Fatalf("a Sync blocked across the crash: %v, want ErrCrashed", err)
	}
	if got, _ := blob.NewBucket(d).ReadAll(ctx, "k"); len(got) != 0 {
		t.Fatalf("after the crash: %q, want nothing", got)
	}
}

// TestCrashInterruptsPutWaitingInBeforeCommit: a Put in flight whose
// BeforeCommit waits on its context (the redo writer's waits for its
// segment's sync) cannot hold Crash up: its context ends, it is abandoned,
// and nothing is stored.
func TestCrashInterruptsPutWaitingInBeforeCommit(t *testing.T) {
	ctx := context.Background()
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := NewFaulty(d)
	inHook := make(chan struct{})
	put := make(chan error, 1)
	go func() {
		_, err := f.Bucket().Put(ctx, "k", []byte("v"), &blob.PutOptions{BeforeCommit: func(ctx context.Context) error {
			close(inHook)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Minute): // bounded, so a regression fails instead of hanging
				return errors.New("the crash did not end the context of a Put in flight")
			}
		}})
		put <- err
	}()
	<-inHook
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := <-put; !errors.Is(err, ErrCrashed) {
		t.Fatalf("Put: %v, want ErrCrashed", err)
	}
	if _, err := d.Stat(ctx, "k"); !errors.Is(err, blob.ErrNotExist) {
		t.Fatalf("the abandoned Put left an object: %v", err)
	}
}
