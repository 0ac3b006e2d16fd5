package writer

import (
	"context"
	"sync"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/codec"
)

// hintingDriver is the local driver with the write-back hints its append
// files are given recorded.
type hintingDriver struct {
	*local.Driver
	mu    sync.Mutex
	hints []hint
}

type hint struct {
	key    string
	off, n int64
}

func (d *hintingDriver) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	f, err := d.Driver.OpenAppend(ctx, key)
	if err != nil {
		return nil, err
	}
	return &hintingFile{AppendFile: f, d: d, key: key}, nil
}

type hintingFile struct {
	blob.AppendFile
	d   *hintingDriver
	key string
}

func (f *hintingFile) StartWriteback(off, n int64) error {
	f.d.mu.Lock()
	f.d.hints = append(f.d.hints, hint{f.key, off, n})
	f.d.mu.Unlock()
	return f.AppendFile.(blob.WritebackStarter).StartWriteback(off, n)
}

// TestWritebackHints: on local disk the writer starts the write-out of every
// 4 MiB it appends between syncs (so that a sync waits for about the last
// chunk), each range once, in order, within what was written; with
// SyncNever, which syncs nothing, it starts none.
func TestWritebackHints(t *testing.T) {
	const total = 24 << 20
	for _, policy := range []SyncPolicy{SyncEveryFlush, SyncNever} {
		ctx := context.Background()
		ld, err := local.NewDriver(t.TempDir(), nil)
		must(t, err)
		d := &hintingDriver{Driver: ld}
		b := blob.NewBucket(d)
		o := writebackOptions()
		o.Sync = policy
		w := openSpan1(t, b, o)
		writeUnresolved(t, w, total, 9)
		must(t, w.AdvanceResolved(1, 1<<40))
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		must(t, w.Close(ctx))
		d.mu.Lock()
		hints := d.hints
		d.mu.Unlock()
		if policy == SyncNever {
			if len(hints) != 0 {
				t.Errorf("SyncNever: %d write-back hints, want none", len(hints))
			}
			continue
		}
		if want := total/writebackChunk - 1; len(hints) < want {
			t.Fatalf("%d write-back hints for %d MiB appended before one sync, want at least %d", len(hints), total>>20, want)
		}
		end := map[string]int64{}
		for _, h := range hints {
			if h.n < writebackChunk || h.off < end[h.key] {
				t.Errorf("hint %+v: want a range of at least %d bytes from %d on", h, writebackChunk, end[h.key])
			}
			end[h.key] = h.off + h.n
		}
		var reach int64
		for _, e := range end {
			reach += e
		}
		if stored := w.Stats().StoredBytes; reach > stored {
			t.Errorf("write-back started over %d bytes, past the %d written", reach, stored)
		}
	}
}

// TestFailedWritebackHints fails every write-back hint: the writer goes on
// as without them (the next sync writes the bytes out), with no retry and
// no error, and every event reads back.
func TestFailedWritebackHints(t *testing.T) {
	const total = 24 << 20
	ctx := context.Background()
	f, b := faultyLocal(t, t.TempDir())
	f.Add(blobtest.Rule{Op: blobtest.OpWriteback, Fail: true})
	w := openSpan1(t, b, writebackOptions())
	n := writeUnresolved(t, w, total, 10)
	must(t, w.AdvanceResolved(1, 1<<40))
	if _, err := w.Flush(ctx); err != nil {
		t.Fatalf("a flush after failed write-back hints: %v", err)
	}
	if got := f.Count(blobtest.OpWriteback); got == 0 {
		t.Fatal("no write-back hint was given: the test proves nothing")
	}
	if s := w.Stats(); s.Retries != 0 {
		t.Errorf("Stats.Retries = %d: a failed hint is not a failure to retry", s.Retries)
	}
	must(t, w.Close(ctx))
	if got := len(readLog(t, b, readOpts{staged: true})); got != n {
		t.Fatalf("read %d events back, wrote %d", got, n)
	}
}

// writebackOptions is a writer that appends raw blocks to one segment and
// syncs only when flushed: what it appends between syncs is all hinted.
func writebackOptions() *Options {
	o := testOptions("w")
	o.Compression = CompressionNone
	o.MemoryQuota = 256 << 20
	o.MaxSegmentBytes = 256 << 20
	o.BlockSize = 64 << 10
	return o
}

// writeUnresolved writes about total bytes of 1 KB rows to span 1, each at
// a commit ts of its own, none resolved, and returns how many.
func writeUnresolved(t *testing.T, w *Writer, total int, seed uint64) int {
	t.Helper()
	r := newRand(seed)
	evs := make([]codec.Event, 64)
	n := 0
	for ; n*1000 < total; n += len(evs) {
		for k := range evs {
			evs[k] = bigRow(r, 1, uint64(n+k+1), int64(n+k), 1000)
		}
		must(t, w.Write(context.Background(), 1, evs...))
	}
	return n
}
