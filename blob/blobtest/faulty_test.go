package blobtest_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
)

func memDriver() driver.Driver { return mem.NewDriver() }

func localDriver(t *testing.T) driver.Driver {
	t.Helper()
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCapabilityFollowsInner(t *testing.T) {
	if blobtest.NewFaulty(memDriver()).Bucket().CanAppend() {
		t.Error("a wrapper of mem claims the Appender capability")
	}
	if !blobtest.NewFaulty(localDriver(t)).Bucket().CanAppend() {
		t.Error("a wrapper of local lacks the Appender capability")
	}
}

func TestFailNthPutAndCounts(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(memDriver())
	b := f.Bucket()
	f.FailNth(blobtest.OpPut, 2, nil)
	if _, err := b.Put(ctx, "a", []byte("1"), nil); err != nil {
		t.Fatalf("first put: %v", err)
	}
	_, err := b.Put(ctx, "b", []byte("2"), nil)
	if !errors.Is(err, blobtest.ErrInjected) || !blob.IsTransient(err) {
		t.Fatalf("second put: got %v, want an injected transient error", err)
	}
	if ok, _ := b.Exists(ctx, "b"); ok {
		t.Fatal("a failed put left its object")
	}
	if _, err := b.Put(ctx, "b", []byte("2"), nil); err != nil {
		t.Fatalf("third put: %v", err)
	}
	if got := f.Count(blobtest.OpPut); got != 3 {
		t.Fatalf("Count(put) = %d, want 3", got)
	}
	if got := f.Counts()[blobtest.OpStat]; got != 1 {
		t.Fatalf("Counts()[stat] = %d, want 1", got)
	}
}

func TestFailWhenMatchesKeys(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(memDriver())
	b := f.Bucket()
	boom := errors.New("boom")
	remove := f.FailWhen(blobtest.OpPut, func(c blobtest.Call) bool { return c.Key == "bad" }, boom)
	if _, err := b.Put(ctx, "good", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "bad", nil, nil); !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	remove()
	if _, err := b.Put(ctx, "bad", nil, nil); err != nil {
		t.Fatalf("after remove: %v", err)
	}
}

func TestBlockHoldsUntilReleaseOrCtx(t *testing.T) {
	f := blobtest.NewFaulty(memDriver())
	b := f.Bucket()
	release := f.Block(blobtest.OpPut)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Put(ctx, "k", []byte("x"), nil)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("blocked put after cancel: got %v, want context.Canceled", err)
	}
	go func() {
		_, err := b.Put(context.Background(), "k", []byte("x"), nil)
		errc <- err
	}()
	release()
	if err := <-errc; err != nil {
		t.Fatalf("released put: %v", err)
	}
	release() // idempotent
}

func TestDelay(t *testing.T) {
	f := blobtest.NewFaulty(memDriver())
	b := f.Bucket()
	f.Delay(blobtest.OpStat, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("delayed stat with a canceled ctx: got %v", err)
	}
}

func TestCrashDropsUnsyncedAppends(t *testing.T) {
	ctx := context.Background()
	d := localDriver(t)
	f := blobtest.NewFaulty(d)
	b := f.Bucket()
	af, err := b.OpenAppend(ctx, "dir/open")
	if err != nil {
		t.Fatal(err)
	}
	closed, err := b.OpenAppend(ctx, "dir/closed")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := b.OpenAppend(ctx, "dir/sealing")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []blob.AppendFile{af, closed, sealed} {
		if _, err := a.Write([]byte("synced.")); err != nil {
			t.Fatal(err)
		}
		if err := a.Sync(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Write([]byte("lost")); err != nil {
			t.Fatal(err)
		}
	}
	// A sync that fails promises nothing.
	f.FailNth(blobtest.OpSync, 1, nil)
	if err := af.Sync(); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("failing sync: %v", err)
	}
	if n, ok := f.SyncedSize("dir/open"); !ok || n != 7 {
		t.Fatalf("SyncedSize = %d, %v; want 7, true", n, ok)
	}
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sealed.Seal(ctx, "dir/sealed"); err != nil {
		t.Fatal(err)
	}
	if err := f.Crash(); err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write([]byte("x")); !errors.Is(err, blobtest.ErrCrashed) {
		t.Fatalf("write after crash: %v", err)
	}
	if _, err := b.Stat(ctx, "dir/open"); !errors.Is(err, blobtest.ErrCrashed) {
		t.Fatalf("stat after crash: %v", err)
	}
	// A new process sees the disk.
	after := blob.NewBucket(d)
	for key, want := range map[string]string{"dir/open": "synced.", "dir/closed": "synced.", "dir/sealed": "synced.lost"} {
		got, err := after.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, []byte(want)) {
			t.Errorf("%s after crash = %q, want %q", key, got, want)
		}
	}
}

func TestPartialWrite(t *testing.T) {
	ctx := context.Background()
	d := localDriver(t)
	f := blobtest.NewFaulty(d)
	b := f.Bucket()
	af, err := b.OpenAppend(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	f.Add(blobtest.Rule{Op: blobtest.OpWrite, Nth: 1, Fail: true, Partial: true})
	n, err := af.Write([]byte("abcdef"))
	if err == nil || n != 3 {
		t.Fatalf("partial write: n=%d err=%v, want 3 and an error", n, err)
	}
	if af.Size() != 3 {
		t.Fatalf("size %d after a torn write, want 3", af.Size())
	}
	af.Close()
}

// TestDroppedSync: a failed Sync with Drop keeps the length and what was
// durable, keeps the page the sync point is in, and zeroes every other page
// after it, starting with the next.
func TestDroppedSync(t *testing.T) {
	ctx := context.Background()
	f := blobtest.NewFaulty(localDriver(t))
	b := f.Bucket()
	af, err := b.OpenAppend(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	const page = 4 << 10
	durable := bytes.Repeat([]byte{'d'}, 100)
	tail := bytes.Repeat([]byte{'t'}, 4*page)
	if _, err := af.Write(durable); err != nil {
		t.Fatal(err)
	}
	if err := af.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write(tail); err != nil {
		t.Fatal(err)
	}
	f.Add(blobtest.Rule{Op: blobtest.OpSync, Nth: 1, Fail: true, Drop: true})
	if err := af.Sync(); !errors.Is(err, blobtest.ErrInjected) {
		t.Fatalf("dropped sync = %v, want ErrInjected", err)
	}
	want := append(bytes.Clone(durable), tail...)
	for p := 1; p*page < len(want); p += 2 {
		clear(want[p*page : min(len(want), (p+1)*page)])
	}
	got, err := b.ReadAll(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("after a dropped sync: %d bytes, zero pages at %v; want %d bytes, pages 1 and 3 zero", len(got), zeroPages(got, page), len(want))
	}
	af.Close()
}

func zeroPages(b []byte, page int) []int {
	var out []int
	for p := 0; p*page < len(b); p++ {
		if bytes.Count(b[p*page:min(len(b), (p+1)*page)], []byte{0}) == min(len(b), (p+1)*page)-p*page {
			out = append(out, p)
		}
	}
	return out
}
