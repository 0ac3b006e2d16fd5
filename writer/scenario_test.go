package writer_test

// The scenario scripts: the chain and writer stories of docs/DESIGN.md
// ("Integrity") and docs/FORMAT.md told as plain text under
// testdata/scenarios, one story a file, in the datadriven format
// (github.com/cockroachdb/datadriven). Each command is a line of
// key=value arguments; the block after "----" is what the code printed.
//
//	go test ./writer -run TestScenarios              # check every script
//	go test ./writer -run TestScenarios/crash -v     # one script
//	go test ./writer -run TestScenarios -rewrite     # write the outputs anew
//
// The commands (every ts is a commit ts; "pattern" is a glob over a
// segment's short name, writer/epoch-seq-min-max.seg or
// writer/epoch-seq.active, numbers without their zero padding):
//
//	open writer=w1 backend=mem|local [spans=(1,2)] [max-segment=BYTES]
//	    a writer takes its writer ID's next epoch. The first open makes the
//	    store: mem is an object store (one object per flush), local a disk
//	    (one growing file, fdatasynced each flush). Spans start at ts 0 and
//	    are registered with the coordinator too.
//	add-span writer=w1 span=2 at=TS
//	    the span joins the writer at TS, and the coordinator unless it
//	    knows the span already (it moved from another writer).
//	write writer=w1 span=1 ts=A..B [rows=N] [pad=BYTES]
//	    a row at every ts from A to B, or N rows spread evenly over them.
//	resolve writer=w1 span=1 ts=TS       the span's resolved ts.
//	flush writer=w1                      a flush: its flushed ts, then ls.
//	publish writer=w1                    a flush and the publication of
//	                                     the writer's state object.
//	close writer=w1                      a clean Close.
//	crash writer=w1                      the process dies: no Close, and on
//	                                     local disk unsynced bytes are gone.
//	fail writer=w1 key=PATTERN [after=PATTERN]
//	    the writer's uploads of matching keys fail from now on (after a key
//	    matching after= has been stored, when given).
//	fence writer=w1                      a new epoch takes the writer ID
//	                                     without writing (a failover): the
//	                                     fence it recorded.
//	recover writer=w1                    the writer ID is opened again: the
//	                                     durable progress the new epoch
//	                                     starts from and its fences; the
//	                                     spans are added back at their ts.
//	list-miss key=PATTERN [times=N]      in the next command that lists
//	                                     them, the first N (default 1)
//	                                     listings of a whole directory that
//	                                     hold matching keys omit them; a
//	                                     listing narrowed to one seq or
//	                                     epoch still shows them.
//	lose key=PATTERN                     matching segments are deleted.
//	save label=L                         keep a copy of the meta object and
//	                                     the writer states.
//	restore-stale object=meta|state:w1 at=L
//	                                     put that older copy back.
//	tick                                 the coordinator moves the global
//	                                     resolved ts.
//	checkpoint ts=TS                     the downstream applied up to TS.
//	gc                                   one GC cycle below the checkpoint.
//	read from=A to=B                     read (A, B]: the events by span,
//	                                     or the error.
//	ls                                   the segments in the store.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/writer"
)

const scenarioLog = "log"

// TestScenarios runs every script under testdata/scenarios.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		w := &world{t: t, handles: map[string]*handle{}, saved: map[string]map[string][]byte{}, coordSpans: map[meta.SpanID]bool{}}
		defer w.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out, err := w.run(d)
			if err != nil {
				t.Fatalf("%s: %s: %v", d.Pos, d.Cmd, err)
			}
			return out
		})
	})
}

// world is one script's log: a store, a coordinator and the writers.
type world struct {
	t          *testing.T
	ctx        context.Context
	backend    string
	dir        string
	store      *missStore
	bucket     *blob.Bucket // every actor but the writers: over the store
	raw        *blob.Bucket // the truth: ls, lose, save, restore
	coord      *meta.Coordinator
	coordSpans map[meta.SpanID]bool
	handles    map[string]*handle
	all        []*handle
	saved      map[string]map[string][]byte
	maxSegment int64
}

// handle is one epoch of a writer ID, behind a store of its own that can
// fail its uploads or crash.
type handle struct {
	w       *writer.Writer
	f       *blobtest.Faulty
	stopped bool
}

func (w *world) close() {
	for _, h := range w.all {
		if !h.stopped {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			h.w.Close(ctx)
		}
	}
	if w.store != nil {
		w.store.Driver.Close()
	}
}

func (w *world) run(d *datadriven.TestData) (string, error) {
	w.ctx = context.Background()
	if d.Cmd != "open" && w.store == nil {
		return "", errors.New("no store yet: the first command opens a writer with backend=mem|local")
	}
	var out string
	var err error
	switch d.Cmd {
	case "open":
		out, err = w.open(d)
	case "add-span":
		out, err = w.addSpan(d)
	case "write":
		out, err = w.write(d)
	case "resolve":
		var h *handle
		if h, err = w.handle(d); err == nil {
			out = errText(h.w.AdvanceResolved(meta.SpanID(w.uint(d, "span")), w.uint(d, "ts")))
		}
	case "flush":
		out, err = w.flush(d, false)
	case "publish":
		out, err = w.flush(d, true)
	case "close":
		var h *handle
		if h, err = w.handle(d); err == nil {
			h.stopped = true
			out = errText(h.w.Close(w.ctx))
		}
	case "crash":
		out, err = w.crash(d)
	case "fail":
		out, err = w.fail(d)
	case "fence":
		out, err = w.fence(d)
	case "recover":
		out, err = w.recover(d)
	case "list-miss":
		times := 1
		if d.HasArg("times") {
			times = int(w.uint(d, "times"))
		}
		w.store.hide(w.str(d, "key"), times)
	case "lose":
		out, err = w.lose(d)
	case "save":
		out, err = w.save(d)
	case "restore-stale":
		out, err = w.restore(d)
	case "tick":
		if m, terr := w.coord.Tick(w.ctx); terr != nil {
			out = errText(terr)
		} else {
			out = fmt.Sprintf("resolved=%d checkpoint=%d\n", m.ResolvedTs, m.CheckpointTs)
		}
	case "checkpoint":
		if cerr := w.coord.SetCheckpoint(w.ctx, w.uint(d, "ts")); cerr != nil {
			out = errText(cerr)
		} else {
			out = fmt.Sprintf("checkpoint=%d\n", w.coord.Meta().CheckpointTs)
		}
	case "gc":
		out, err = w.gc()
	case "read":
		out, err = w.read(d)
	case "ls":
		out, err = w.ls()
	default:
		return "", fmt.Errorf("unknown command %q", d.Cmd)
	}
	if err != nil {
		return "", err
	}
	return w.store.takeNotes() + out, nil
}

// open makes the store (the first time) and a writer.
func (w *world) open(d *datadriven.TestData) (string, error) {
	if b := w.optStr(d, "backend"); b != "" {
		if w.store != nil && b != w.backend {
			return "", fmt.Errorf("the store is %s already", w.backend)
		}
		if w.store == nil {
			if err := w.makeStore(b); err != nil {
				return "", err
			}
		}
	}
	if w.store == nil {
		return "", errors.New("the first open names the store: backend=mem|local")
	}
	if d.HasArg("max-segment") {
		w.maxSegment = int64(w.uint(d, "max-segment"))
	}
	id := w.str(d, "writer")
	if err := w.coord.AddWriter(w.ctx, id); err != nil {
		return "", err
	}
	h, err := w.openWriter(id)
	if err != nil {
		return errText(err), nil
	}
	var spans []meta.SpanID
	if d.HasArg("spans") {
		for _, a := range d.CmdArgs {
			if a.Key != "spans" {
				continue
			}
			for _, v := range a.Vals {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return "", fmt.Errorf("spans: %v", err)
				}
				spans = append(spans, meta.SpanID(n))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: epoch %d\n", id, h.w.Epoch())
	for _, s := range spans {
		b.WriteString(w.addSpanTo(h, s, 0))
	}
	return b.String(), nil
}

func (w *world) makeStore(backend string) error {
	var base driver.Driver
	switch backend {
	case "mem":
		base = mem.NewDriver()
	case "local":
		w.dir = w.t.TempDir()
		d, err := local.NewDriver(w.dir, nil)
		if err != nil {
			return err
		}
		base = d
	default:
		return fmt.Errorf("backend %q: mem or local", backend)
	}
	w.backend = backend
	w.store = &missStore{Driver: base}
	w.bucket = blob.NewBucket(w.store.driver())
	w.raw = blob.NewBucket(noClose{base})
	c, err := meta.OpenCoordinator(w.ctx, w.bucket, scenarioLog, &meta.CoordinatorOptions{StartTs: 0, StaleAfter: time.Hour})
	if err != nil {
		return err
	}
	w.coord = c
	return nil
}

// openWriter opens a writer ID's next epoch behind a store of its own.
func (w *world) openWriter(id string) (*handle, error) {
	f := blobtest.NewFaulty(noCloseDriver(w.store.driver()))
	o := &writer.Options{
		LogID: scenarioLog, WriterID: id,
		FlushInterval:   time.Hour,
		PublishInterval: time.Hour,
		MaxSegmentAge:   -1,
		MaxSegmentBytes: w.maxSegment,
		BlockSize:       1 << 10,
		MaxUploads:      4,
		RetryAttempts:   1,
		RetryBackoff:    time.Millisecond, RetryMaxBackoff: time.Millisecond,
		RetractTimeout: 5 * time.Second,
		Owner:          "scenario",
	}
	wr, err := writer.Open(w.ctx, f.Bucket(), o)
	if err != nil {
		return nil, err
	}
	// An earlier epoch still running lives on as a zombie no command
	// reaches; w.close stops it.
	h := &handle{w: wr, f: f}
	w.handles[id] = h
	w.all = append(w.all, h)
	return h, nil
}

// addSpanTo adds a span to a writer and, unless it knows it, the
// coordinator.
func (w *world) addSpanTo(h *handle, s meta.SpanID, at uint64) string {
	if !w.coordSpans[s] {
		if err := w.coord.AddSpan(w.ctx, s, at); err != nil {
			return fmt.Sprintf("span %d at %d: coordinator: %s", s, at, errText(err))
		}
		w.coordSpans[s] = true
	}
	if err := h.w.AddSpan(s, at); err != nil {
		return fmt.Sprintf("span %d at %d: writer: %s", s, at, errText(err))
	}
	return fmt.Sprintf("span %d at %d\n", s, at)
}

func (w *world) addSpan(d *datadriven.TestData) (string, error) {
	h, err := w.handle(d)
	if err != nil {
		return "", err
	}
	return w.addSpanTo(h, meta.SpanID(w.uint(d, "span")), w.uint(d, "at")), nil
}

func (w *world) write(d *datadriven.TestData) (string, error) {
	h, err := w.handle(d)
	if err != nil {
		return "", err
	}
	span := meta.SpanID(w.uint(d, "span"))
	lo, hi, err := tsRange(w.str(d, "ts"))
	if err != nil {
		return "", err
	}
	var ts []uint64
	if d.HasArg("rows") {
		n := w.uint(d, "rows")
		for i := range n {
			if n == 1 {
				ts = append(ts, lo)
				break
			}
			ts = append(ts, lo+(hi-lo)*i/(n-1))
		}
	} else {
		for t := lo; t <= hi; t++ {
			ts = append(ts, t)
		}
	}
	pad := 0
	if d.HasArg("pad") {
		pad = int(w.uint(d, "pad"))
	}
	evs := make([]codec.Event, 0, len(ts))
	for _, t := range ts {
		evs = append(evs, scenarioRow(span, t, pad))
	}
	return errText(h.w.Write(w.ctx, span, evs...)), nil
}

// scenarioRow is the row of a span at a ts: the same bytes whoever writes
// it, so a row written again after a failover is an exact duplicate.
func scenarioRow(span meta.SpanID, ts uint64, pad int) codec.Event {
	cols := []codec.Column{codectest.Key("id", int64(ts)), codectest.Str("v", fmt.Sprintf("span %d at %d", span, ts))}
	if pad > 0 {
		// Text lz4 cannot shrink much: a pseudo-random alphabet soup.
		p := make([]byte, pad)
		x := uint32(ts)*2654435761 + uint32(span)
		for i := range p {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			p[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[x%36]
		}
		cols = append(cols, codectest.Str("pad", string(p)))
	}
	return codectest.Row(ts, codectest.Table("db", fmt.Sprintf("t%d", span), int64(span)), cols...)
}

func (w *world) flush(d *datadriven.TestData, publish bool) (string, error) {
	h, err := w.handle(d)
	if err != nil {
		return "", err
	}
	var ts uint64
	var what string
	if publish {
		ts, err = h.w.Publish(w.ctx)
		what = "published"
	} else {
		ts, err = h.w.Flush(w.ctx)
		what = "flushed"
	}
	if err != nil {
		out := errText(err)
		ls, lerr := w.ls()
		return out + ls, lerr
	}
	ls, err := w.ls()
	return fmt.Sprintf("%s=%d\n%s", what, ts, ls), err
}

func (w *world) crash(d *datadriven.TestData) (string, error) {
	h, err := w.handle(d)
	if err != nil {
		return "", err
	}
	if err := h.f.Crash(); err != nil {
		return "", err
	}
	// Stop its goroutines: every call it makes now fails, as a dead
	// process makes none.
	ctx, cancel := context.WithCancel(w.ctx)
	cancel()
	h.w.Close(ctx)
	h.stopped = true
	return w.ls()
}

func (w *world) fail(d *datadriven.TestData) (string, error) {
	h, err := w.handle(d)
	if err != nil {
		return "", err
	}
	pattern := w.str(d, "key")
	if _, err := path.Match(pattern, ""); err != nil {
		return "", err
	}
	r := blobtest.Rule{Op: blobtest.OpPut, Fail: true, Match: func(c blobtest.Call) bool {
		ok, _ := path.Match(pattern, shortKey(c.Key))
		return ok
	}}
	if after := w.optStr(d, "after"); after != "" {
		r.Wait = w.store.afterPut(after)
	}
	h.f.Add(r)
	return "", nil
}

func (w *world) fence(d *datadriven.TestData) (string, error) {
	id := w.str(d, "writer")
	// What redokit.Log.FenceWriter does: writer.Fence, a new epoch taken
	// without writing, fenced where the old epoch's durable progress ends.
	if err := writer.Fence(w.ctx, w.bucket, scenarioLog, id, nil); err != nil {
		return errText(err), nil
	}
	st, _, err := meta.ReadWriterState(w.ctx, w.bucket, scenarioLog, id)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s: epoch %d\n%s", id, st.Epoch, fences(st)), nil
}

func (w *world) recover(d *datadriven.TestData) (string, error) {
	id := w.str(d, "writer")
	h, err := w.openWriter(id)
	if err != nil {
		return errText(err), nil
	}
	st, _, err := meta.ReadWriterState(w.ctx, w.bucket, scenarioLog, id)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: epoch %d flushed=%d\n%s", id, h.w.Epoch(), h.w.FlushedTs(), fences(st))
	for _, s := range st.Spans {
		b.WriteString(w.addSpanTo(h, meta.SpanID(s.Span), s.Ts))
	}
	return b.String(), nil
}

// fences prints a state's fences, the newest epoch's first.
func fences(st *meta.WriterState) string {
	var b strings.Builder
	fs := slices.Clone(st.Fences)
	sort.Slice(fs, func(i, j int) bool { return fs[i].Epoch > fs[j].Epoch })
	for _, f := range fs {
		fmt.Fprintf(&b, "fence: epoch %d ends at seq %d, max ts %d\n", f.Epoch, f.LastSeq, f.MaxTs)
	}
	return b.String()
}

func (w *world) lose(d *datadriven.TestData) (string, error) {
	pattern := w.str(d, "key")
	keys, err := w.segments()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, k := range keys {
		if ok, err := path.Match(pattern, shortKey(k)); err != nil {
			return "", err
		} else if ok {
			if err := w.raw.Delete(w.ctx, k); err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "lost %s\n", shortKey(k))
		}
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("no segment matches %q", pattern)
	}
	return b.String(), nil
}

// metaKeys are the metadata objects: the meta object and the writer states.
func (w *world) metaKeys() (map[string]string, error) {
	keys := map[string]string{"meta": scenarioLog + "/meta"}
	for a, err := range w.raw.List(w.ctx, scenarioLog+"/writers/") {
		if err != nil {
			return nil, err
		}
		keys["state:"+strings.TrimPrefix(a.Key, scenarioLog+"/writers/")] = a.Key
	}
	return keys, nil
}

func (w *world) save(d *datadriven.TestData) (string, error) {
	keys, err := w.metaKeys()
	if err != nil {
		return "", err
	}
	copies := map[string][]byte{}
	var names []string
	for name, k := range keys {
		data, err := w.raw.ReadAll(w.ctx, k)
		if err != nil {
			return "", err
		}
		copies[name] = data
		names = append(names, name)
	}
	sort.Strings(names)
	w.saved[w.str(d, "label")] = copies
	return "saved " + strings.Join(names, " ") + "\n", nil
}

func (w *world) restore(d *datadriven.TestData) (string, error) {
	obj, label := w.str(d, "object"), w.str(d, "at")
	data, ok := w.saved[label][obj]
	if !ok {
		return "", fmt.Errorf("no copy of %s saved as %q", obj, label)
	}
	keys, err := w.metaKeys()
	if err != nil {
		return "", err
	}
	if _, err := w.raw.Put(w.ctx, keys[obj], data, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s is the copy saved as %s\n", obj, label), nil
}

func (w *world) gc() (string, error) {
	r, err := gc.Collect(w.ctx, w.bucket, scenarioLog, nil)
	if err != nil {
		return errText(err), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "below checkpoint %d: deleted %d, kept by chain %d\n", r.Checkpoint, r.Deleted, r.KeptByChain)
	for _, k := range r.DeletedKeys {
		fmt.Fprintf(&b, "deleted %s\n", shortKey(k))
	}
	return b.String(), nil
}

func (w *world) read(d *datadriven.TestData) (string, error) {
	r, err := reader.Open(w.ctx, w.bucket, &reader.Options{LogID: scenarioLog, StartTs: w.uint(d, "from"), EndTs: w.uint(d, "to"), Concurrency: 1})
	if err != nil {
		return w.scrub(errText(err)), nil
	}
	defer r.Close()
	bySpan := map[int64][]string{}
	n := 0
	for ev, err := range r.Events(w.ctx) {
		if err != nil {
			return w.scrub(errText(err)), nil
		}
		n++
		s := ev.Row.Table.PhysicalID
		bySpan[s] = append(bySpan[s], strconv.FormatUint(ev.CommitTs(), 10))
	}
	var spans []int64
	for s := range bySpan {
		spans = append(spans, s)
	}
	slices.Sort(spans)
	var b strings.Builder
	st := r.Stats()
	fmt.Fprintf(&b, "%d events from %s\n", n, plural(st.SegmentsSelected, "segment"))
	var skipped []string
	for _, c := range []struct {
		n    int64
		what string
	}{
		{int64(st.SegmentsFenced), "segment fenced out"},
		{int64(st.AboveFence), "segment with events above its fence"},
		{st.Duplicates, "duplicate"},
	} {
		if c.n > 0 {
			skipped = append(skipped, plural(int(c.n), c.what))
		}
	}
	if len(skipped) > 0 {
		fmt.Fprintf(&b, "left out: %s\n", strings.Join(skipped, ", "))
	}
	for _, s := range spans {
		fmt.Fprintf(&b, "span %d: %s\n", s, strings.Join(bySpan[s], " "))
	}
	return b.String(), nil
}

// segments lists the store's segment keys as they are (no listing fault).
func (w *world) segments() ([]string, error) {
	var keys []string
	for a, err := range w.raw.List(w.ctx, scenarioLog+"/seg/") {
		if err != nil {
			return nil, err
		}
		keys = append(keys, a.Key)
	}
	sort.Strings(keys)
	return keys, nil
}

func (w *world) ls() (string, error) {
	keys, err := w.segments()
	if err != nil {
		return "", err
	}
	if len(keys) == 0 {
		return "no segments\n", nil
	}
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s\n", shortKey(k))
	}
	return b.String(), nil
}

func (w *world) handle(d *datadriven.TestData) (*handle, error) {
	id := w.str(d, "writer")
	h := w.handles[id]
	if h == nil {
		return nil, fmt.Errorf("no writer %q open", id)
	}
	return h, nil
}

func (w *world) str(d *datadriven.TestData, key string) string {
	var s string
	d.ScanArgs(w.t, key, &s)
	return s
}

func (w *world) optStr(d *datadriven.TestData, key string) string {
	if !d.HasArg(key) {
		return ""
	}
	return w.str(d, key)
}

func (w *world) uint(d *datadriven.TestData, key string) uint64 {
	s := w.str(d, key)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		w.t.Fatalf("%s: %s=%q: %v", d.Pos, key, s, err)
	}
	return n
}

// plural is "1 segment", "2 segments", "2 segments fenced out".
func plural(n int, what string) string {
	if n != 1 {
		noun, rest, _ := strings.Cut(what, " ")
		what = strings.TrimSpace(noun + "s " + rest)
	}
	return fmt.Sprintf("%d %s", n, what)
}

func tsRange(s string) (lo, hi uint64, err error) {
	a, b, ok := strings.Cut(s, "..")
	if !ok {
		b = a
	}
	if lo, err = strconv.ParseUint(a, 10, 64); err == nil {
		hi, err = strconv.ParseUint(b, 10, 64)
	}
	if err == nil && hi < lo {
		err = fmt.Errorf("ts=%s: empty range", s)
	}
	return lo, hi, err
}

// sentinels name the error an output line shows, for readers who do not
// read Go.
var sentinels = []struct {
	name string
	err  error
}{
	{"reader.ErrIncomplete", reader.ErrIncomplete},
	{"reader.ErrUnproven", reader.ErrUnproven},
	{"meta.ErrStale", meta.ErrStale},
	{"meta.ErrSpanTooLate", meta.ErrSpanTooLate},
	{"meta.ErrFenced", meta.ErrFenced},
	{"meta.ErrInconsistent", meta.ErrInconsistent},
	{"segment.ErrCorrupt", segment.ErrCorrupt},
	{"blobtest.ErrInjected", blobtest.ErrInjected},
	{"blobtest.ErrCrashed", blobtest.ErrCrashed},
	{"writer.ErrBelowResolved", writer.ErrBelowResolved},
}

// errText is "" for nil, else "error (the sentinels it matches): text".
func errText(err error) string {
	if err == nil {
		return ""
	}
	var names []string
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			names = append(names, s.name)
		}
	}
	text := scrubText(err.Error())
	if len(names) == 0 {
		return "error: " + text + "\n"
	}
	return fmt.Sprintf("error (%s): %s\n", strings.Join(names, ", "), text)
}

var padded = regexp.MustCompile(`\b\d{20}\b`)

// scrubText drops the zero padding of segment names' numbers.
func scrubText(s string) string {
	return padded.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.ParseUint(m, 10, 64)
		return strconv.FormatUint(n, 10)
	})
}

// scrub also names the local store's directory $DIR.
func (w *world) scrub(s string) string {
	if w.dir != "" {
		s = strings.ReplaceAll(s, w.dir, "$DIR")
	}
	return s
}

// shortKey is a segment key without its log's prefix and with its numbers
// unpadded: w1/1-2-10-50.seg.
func shortKey(key string) string {
	return scrubText(strings.TrimPrefix(key, scenarioLog+"/seg/"))
}

// missStore is the shared store: the backend, and listings that miss keys
// when a script says so.
type missStore struct {
	driver.Driver
	mu    sync.Mutex
	rules []*missRule
	waits []*putWait
	notes []string
}

type missRule struct {
	pattern string
	times   int
	used    bool // it hid a key in this command: it ends with it
}

type putWait struct {
	pattern string
	ch      chan struct{}
	once    sync.Once
}

// driver is the store with the backend's Appender, when it has one.
func (m *missStore) driver() driver.Driver {
	if _, ok := m.Driver.(driver.Appender); ok {
		return missAppender{m}
	}
	return m
}

func (m *missStore) hide(pattern string, times int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rules = append(m.rules, &missRule{pattern: pattern, times: times})
}

// afterPut returns a channel closed once a put of a key matching pattern
// has been stored (or after 5 s, so that a script that waits for a key
// never put fails instead of hanging).
func (m *missStore) afterPut(pattern string) <-chan struct{} {
	pw := &putWait{pattern: pattern, ch: make(chan struct{})}
	m.mu.Lock()
	m.waits = append(m.waits, pw)
	m.mu.Unlock()
	time.AfterFunc(5*time.Second, func() { pw.once.Do(func() { close(pw.ch) }) })
	return pw.ch
}

func (m *missStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts driver.PutOptions) (driver.Attrs, error) {
	a, err := m.Driver.Put(ctx, key, r, size, opts)
	if err == nil {
		m.mu.Lock()
		for _, pw := range m.waits {
			if ok, _ := path.Match(pw.pattern, shortKey(key)); ok {
				pw.once.Do(func() { close(pw.ch) })
			}
		}
		m.mu.Unlock()
	}
	return a, err
}

func (m *missStore) List(ctx context.Context, opts driver.ListOptions) (driver.ListPage, error) {
	page, err := m.Driver.List(ctx, opts)
	if err != nil {
		return page, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	whole := strings.HasSuffix(opts.Prefix, "/")
	var hid []string
	for _, r := range m.rules {
		if r.times == 0 || !whole {
			continue
		}
		n := len(page.Objects)
		page.Objects = slices.DeleteFunc(slices.Clone(page.Objects), func(a driver.Attrs) bool {
			ok, _ := path.Match(r.pattern, shortKey(a.Key))
			if ok {
				hid = append(hid, shortKey(a.Key))
			}
			return ok
		})
		if len(page.Objects) < n {
			r.times--
			r.used = true
		}
	}
	if len(m.rules) > 0 && strings.Contains(opts.Prefix, "/seg/") {
		line := "a listing of " + strings.TrimPrefix(opts.Prefix, scenarioLog+"/")
		if len(hid) > 0 {
			line += " missed " + strings.Join(hid, " ")
		}
		m.notes = append(m.notes, scrubText(line))
	}
	return page, nil
}

// takeNotes returns what the segment listings of a command did while a
// list-miss rule was there, and forgets the rules that hid a key: a rule
// lasts one command.
func (m *missStore) takeNotes() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	missed := false
	for _, n := range m.notes {
		missed = missed || strings.Contains(n, " missed ")
	}
	if missed {
		for _, n := range m.notes {
			fmt.Fprintf(&b, "store: %s\n", n)
		}
	}
	m.notes = nil
	m.rules = slices.DeleteFunc(m.rules, func(r *missRule) bool { return r.times == 0 || r.used })
	return b.String()
}

type missAppender struct{ *missStore }

func (m missAppender) OpenAppend(ctx context.Context, key string) (driver.AppendFile, error) {
	return m.Driver.(driver.Appender).OpenAppend(ctx, key)
}

// noClose keeps a bucket's Close from closing the shared store.
type noClose struct{ driver.Driver }

func (noClose) Close() error { return nil }

type noCloseAppender struct{ noClose }

func (n noCloseAppender) OpenAppend(ctx context.Context, key string) (driver.AppendFile, error) {
	return n.Driver.(driver.Appender).OpenAppend(ctx, key)
}

func noCloseDriver(d driver.Driver) driver.Driver {
	if _, ok := d.(driver.Appender); ok {
		return noCloseAppender{noClose{d}}
	}
	return noClose{d}
}
