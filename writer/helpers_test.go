package writer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

const testLog = "log-1"

// testOptions are small, fast options for tests: the ticker never fires on
// its own during a test, so flushes happen when the test says.
func testOptions(writerID string) *Options {
	return &Options{
		LogID: testLog, WriterID: writerID,
		FlushInterval: time.Hour,
		BlockSize:     4 << 10,
		RetryBackoff:  time.Millisecond, RetryMaxBackoff: 2 * time.Millisecond,
	}
}

func memBucket() *blob.Bucket { return mem.New() }

// onBothStores runs f as a subtest on each store a writer drives differently:
// an object store (mem) and an appendable one (local disk).
func onBothStores(t *testing.T, f func(t *testing.T, b *blob.Bucket)) {
	t.Run("mem", func(t *testing.T) { f(t, memBucket()) })
	t.Run("local", func(t *testing.T) { f(t, localBucket(t, t.TempDir())) })
}

// faultyLocal is a local store in dir behind a blobtest.Faulty, and the
// bucket over it.
func faultyLocal(t testing.TB, dir string) (*blobtest.Faulty, *blob.Bucket) {
	t.Helper()
	d, err := local.NewDriver(dir, nil)
	must(t, err)
	f := blobtest.NewFaulty(d)
	return f, f.Bucket()
}

// faultyMem is a Faulty over a fresh memory driver, and its bucket.
func faultyMem() (*blobtest.Faulty, *blob.Bucket) {
	f := blobtest.NewFaulty(mem.NewDriver())
	return f, f.Bucket()
}

func localBucket(t testing.TB, dir string) *blob.Bucket {
	t.Helper()
	b, err := local.New(dir, &local.Options{CreateDir: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func open(t testing.TB, b *blob.Bucket, o *Options) *Writer {
	t.Helper()
	w, err := Open(context.Background(), b, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(context.Background()) })
	return w
}

// openSpan1 is open with span 1 added at ts 0, where most tests start.
func openSpan1(t testing.TB, b *blob.Bucket, o *Options) *Writer {
	t.Helper()
	w := open(t, b, o)
	must(t, w.AddSpan(1, 0))
	return w
}

// row makes a row event of a span; id is carried in a column so that tests
// can tell events apart.
func row(span SpanID, ts uint64, id int64) codec.Event {
	return codectest.Row(ts, spanTable(span), codectest.Key("id", id), codectest.Str("v", fmt.Sprintf("value of %d at %d", id, ts)))
}

// spanTable is the table of a span: db.t<span>, with the span as its
// physical ID.
func spanTable(span SpanID) codec.TableName {
	return codectest.Table("db", fmt.Sprintf("t%d", span), int64(span))
}

// bigRow is a row with a payload of about n bytes of compressible text.
func bigRow(r *rand.Rand, span SpanID, ts uint64, id int64, n int) codec.Event {
	ev := row(span, ts, id)
	pad := make([]byte, n)
	const alphabet = "abcdefghijklmnopqrstuvwxyz      0123456789"
	for i := range pad {
		pad[i] = alphabet[r.IntN(len(alphabet))]
	}
	ev.Row.Columns = append(ev.Row.Columns, codec.Column{Name: "pad", Type: codec.TypeBlob, Value: codec.StringValue(string(pad))})
	return ev
}

func ddl(span SpanID, ts uint64, query string) codec.Event {
	t := spanTable(span)
	return codectest.DDL(ts, t, codec.ActionType(5), query, codectest.Affected(t))
}

// got is one event read back.
type got struct {
	seg  string
	ts   uint64
	kind segment.Kind
	span SpanID
	id   int64  // rows: the id column
	ddl  string // DDLs: the query
}

func (g got) String() string {
	if g.kind == segment.KindDDL {
		return fmt.Sprintf("ddl(span %d @%d %q)", g.span, g.ts, g.ddl)
	}
	return fmt.Sprintf("row(span %d @%d id %d)", g.span, g.ts, g.id)
}

// readOpts say how readLog reads.
type readOpts struct {
	fenced bool // skip segments the writers' fences do not accept
	staged bool // the writer staged: rows may follow DDLs of their ts across cuts
}

// readLog reads every segment of the log, sealed ones with a Reader and
// active ones with a Scanner (a torn tail ends them), checks that each is in
// commit-ts order with rows before DDLs at one ts, checks each record's
// commit ts against its decoded event, and returns the events in segment
// name order.
func readLog(t testing.TB, b *blob.Bucket, ro readOpts) []got {
	t.Helper()
	ctx := context.Background()
	var states map[string]*meta.WriterState
	if ro.fenced {
		var err error
		if states, err = meta.ListWriterStates(ctx, b, testLog, nil); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for a, err := range b.List(ctx, layout.Segments(testLog)) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.Key)
	}
	sort.Strings(keys)
	var out []got
	for _, key := range keys {
		n, err := segment.ParseName(key)
		if err != nil {
			t.Fatalf("segment key %q: %v", key, err)
		}
		if ro.fenced {
			if st := states[n.WriterID]; st != nil && !st.Accepts(n) {
				continue
			}
		}
		data, err := b.ReadAll(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		next, hdr := openSegment(t, key, n, data)
		if hdr.Epoch != n.Epoch || hdr.Seq != n.Seq || hdr.WriterID != n.WriterID || hdr.LogID != n.LogID {
			t.Fatalf("%s: header %+v disagrees with the name", key, hdr)
		}
		var prev *got
		var ev codec.Event
		for {
			r, err := next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if err := codec.DecodeEvent(r.Payload, &ev); err != nil {
				t.Fatalf("%s: decode: %v", key, err)
			}
			if ev.CommitTs() != r.CommitTs {
				t.Fatalf("%s: record at ts %d holds an event at %d", key, r.CommitTs, ev.CommitTs())
			}
			g := got{seg: key, ts: r.CommitTs, kind: r.Kind}
			if ev.IsDDL() {
				g.span, g.ddl = SpanID(ev.DDL.Table.PhysicalID), ev.DDL.Query
			} else {
				g.span, g.id = SpanID(ev.Row.Table.PhysicalID), ev.Row.Columns[0].Value.Int()
			}
			// Rows before DDLs within a ts holds within one cut; a later
			// cut of a ts that a stage cut stored part of may add rows
			// after its DDLs (valid: readers hold DDLs to the ts's end).
			if prev != nil && (g.ts < prev.ts || g.ts == prev.ts && g.kind < prev.kind && !ro.staged) {
				t.Fatalf("%s: %v after %v: not in flush order", key, g, *prev)
			}
			if !n.Active && (g.ts < n.MinTs || g.ts > n.MaxTs) {
				t.Fatalf("%s: %v outside the name's range", key, g)
			}
			out = append(out, g)
			prev = &out[len(out)-1]
		}
	}
	return out
}

// openSegment returns a record iterator over a segment's bytes.
func openSegment(t testing.TB, key string, n segment.Name, data []byte) (func() (segment.Record, error), segment.Header) {
	t.Helper()
	if n.Active {
		s := segment.NewScanner(bytes.NewReader(data), &segment.ScannerOptions{Object: key})
		hdr, err := s.Header()
		if err == io.EOF {
			return func() (segment.Record, error) { return segment.Record{}, io.EOF }, segment.Header{LogID: n.LogID, WriterID: n.WriterID, Epoch: n.Epoch, Seq: n.Seq}
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return s.Next, hdr
	}
	r, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Object: key})
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return r.Next, r.Header()
}

// segmentKeys lists the log's segment keys.
func segmentKeys(t testing.TB, b *blob.Bucket) []string {
	t.Helper()
	var keys []string
	for a, err := range b.List(context.Background(), layout.Segments(testLog)) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, a.Key)
	}
	return keys
}

func names(t testing.TB, keys []string) []segment.Name {
	t.Helper()
	var ns []segment.Name
	for _, k := range keys {
		n, err := segment.ParseName(k)
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	return ns
}

func describe(gs []got) string {
	var sb strings.Builder
	for _, g := range gs {
		sb.WriteString(g.String())
		sb.WriteByte('\n')
	}
	return sb.String()
}

// mustFlush flushes and waits for the state object to publish the flush
// (Writer.Publish), as most tests read the log right after. The lazy
// publication itself has its own tests (TestRequestsPerFlush,
// TestRecoveryKeepsDurableProgress, the crash and fault trials).
func mustFlush(t testing.TB, w *Writer) uint64 {
	t.Helper()
	ts, err := w.Publish(context.Background())
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return ts
}

// flushTo flushes w and fails the test unless the flushed ts is want.
func flushTo(t testing.TB, w *Writer, want uint64) {
	t.Helper()
	if ts := mustFlush(t, w); ts != want {
		t.Fatalf("Flush = %d, want %d", ts, want)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// newStoreHarness returns a committer with no pipeline around it, on a
// lease of its own (a new epoch of o's writer ID on an empty log), so that a
// test drives its store through the store interface from its own goroutine.
func newStoreHarness(t *testing.T, b *blob.Bucket, o *Options) *committer {
	t.Helper()
	ctx := context.Background()
	oo, err := o.withDefaults()
	must(t, err)
	lease, err := meta.AcquireWriter(ctx, b, oo.LogID, oo.WriterID, &meta.AcquireOptions{})
	must(t, err)
	st := lease.State()
	w := &Writer{b: b, o: oo, comp: oo.Compression.segment(), lease: lease, epoch: st.Epoch, log: oo.Logger,
		append: b.CanAppend(), quota: newQuota(oo.MemoryQuota), pools: newPools(16, 0)}
	w.ctx, w.cancel = context.WithCancel(ctx)
	c := newCommitter(w, 1, st)
	w.pub = c.pub
	go c.pub.run()
	t.Cleanup(func() {
		w.cancel()
		<-c.pub.finished
	})
	return c
}

// storedFrame is a finished block of rows of span, one per ts, whose ids
// count up from id.
func storedFrame(t *testing.T, w *Writer, span SpanID, id int64, ts ...uint64) *blockTask {
	t.Helper()
	bb := new(segment.BlockBuilder)
	for i, x := range ts {
		ev := row(span, x, id+int64(i))
		must(t, bb.Append(x, segment.KindRow, codec.AppendEvent(nil, &ev)))
	}
	task := &blockTask{pools: w.pools, done: make(chan struct{})}
	var enc segment.FrameEncoder
	task.frame, task.err = enc.Encode(nil, bb, w.comp)
	must(t, task.err)
	close(task.done)
	return task
}

func tsRange(from, to uint64) []uint64 {
	var out []uint64
	for ts := from; ts <= to; ts++ {
		out = append(out, ts)
	}
	return out
}

// backendDriver is a fresh driver of backend: "mem", or "local" in a
// temporary directory.
func backendDriver(t *testing.T, backend string) driver.Driver {
	t.Helper()
	if backend == "mem" {
		return mem.NewDriver()
	}
	d, err := local.NewDriver(t.TempDir(), &local.Options{CreateDir: true})
	must(t, err)
	return d
}

// recordDestruction records every delete ("delete KEY") and truncate
// ("truncate KEY") that f passes on.
func recordDestruction(f *blobtest.Faulty) *[]string {
	var destroyed []string
	f.Add(blobtest.Rule{Op: blobtest.OpDelete, Match: func(c blobtest.Call) bool {
		destroyed = append(destroyed, "delete "+c.Key)
		return false
	}})
	f.Add(blobtest.Rule{Op: blobtest.OpTruncate, Match: func(c blobtest.Call) bool {
		destroyed = append(destroyed, "truncate "+c.Key)
		return false
	}})
	return &destroyed
}
