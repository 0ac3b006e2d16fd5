package main

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/segment"
)

// The sort-then-merge baseline reader: a model of TiCDC's `redo apply`
// reader (pkg/redo/reader/{reader,file}.go, see
// shared/reference/ticdc-redo.md §5) on redokit's own objects and codec, so
// that the read cells can set redokit's reader against it on the very log
// it reads. TiCDC's pipeline:
//
//  1. list the log's objects, keeping those whose name's max commit ts is
//     above the start of the range;
//  2. a pool of 16 workers each downloads a whole object, decodes every
//     record in it into memory, sorts the records by (commit ts, start ts,
//     delete < update < insert), drops those outside (start, end] and
//     writes them to a local sorted file (.sort): memory ≈ workers × the
//     decoded size of an object;
//  3. a k-way heap merge across the sorted files, each read back through a
//     4 KiB bufio.Reader and decoded record by record, yields the events in
//     commit-ts order.
//
// Where the model departs from TiCDC it is in TiCDC's favour, so that the
// ratio to redokit's reader is a lower bound: redokit's codec instead of
// msgpack (far cheaper to decode), a pdqsort instead of TiCDC's heap sort,
// no fsync of the sorted files, the merge decodes into one event per file
// instead of allocating a record per read, and the merged events are
// consumed in the merging goroutine instead of through a channel. The
// closer model, on TiCDC-format files of the same events (lz4, msgp), is
// ticdcmerge.go; this one stays as a lower bound of the ratio.
const (
	sortMergeWorkers   = 16       // TiCDC's defaultWorkerNum
	sortMergeReadBuf   = 4 << 10  // bufio.NewReader's default, as TiCDC's merge uses
	sortMergeWriteBuf  = 64 << 10 // the sorted file's write buffer
	sortMergeFrameSize = 4        // little-endian uint32 length before each encoded event
)

// sortMergeStats are the phases of one sort-then-merge read.
type sortMergeStats struct {
	objects     int           // segments downloaded and sorted
	sortedBytes int64         // bytes of the sorted files (frames included)
	sortPhase   time.Duration // list, download, decode, sort, write
	mergePhase  time.Duration // open the sorted files and merge them
}

// sortMergeRead reads the events of logID with commit ts in (start, end]
// the way TiCDC's redo apply does (see above), writing its sorted files
// under tmpDir, and folds every event it yields, in order, into the digest.
func sortMergeRead(ctx context.Context, b *blob.Bucket, logID string, start, end uint64, tmpDir string) (*eventDigest, sortMergeStats, error) {
	return sortThenMerge(tmpDir,
		func() ([]string, error) { return sortMergeObjects(ctx, b, logID, start) },
		func(key, file string) (int64, error) { return sortObject(ctx, b, key, start, end, file) },
		func(files []string) (*eventDigest, error) { return mergeSortedFiles(files, start, end) })
}

// sortThenMerge is the skeleton both sort-then-merge models share
// (sortMergeRead on redokit's objects, ticdcSortMergeRead on TiCDC-format
// files), so that they differ only in what they list, decode, order and
// frame: list the sources, then a pool of sortMergeWorkers workers turns
// each source into a sorted file of its own under tmpDir (sortOne returns
// the bytes it wrote), then merge reads the sorted files back in order.
// The sort phase is timed from before the listing, as TiCDC's reader lists
// before it downloads.
func sortThenMerge(tmpDir string, list func() ([]string, error), sortOne func(src, file string) (int64, error), merge func(files []string) (*eventDigest, error)) (*eventDigest, sortMergeStats, error) {
	var st sortMergeStats
	t0 := time.Now()
	srcs, err := list()
	if err != nil {
		return nil, st, err
	}
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return nil, st, err
	}
	st.objects = len(srcs)
	files := make([]string, len(srcs))
	sizes := make([]int64, len(srcs))
	errs := make([]error, len(srcs))
	limit := make(chan struct{}, sortMergeWorkers)
	var wg sync.WaitGroup
	for i, src := range srcs {
		limit <- struct{}{}
		files[i] = filepath.Join(tmpDir, fmt.Sprintf("%06d.sort", i))
		wg.Go(func() {
			defer func() { <-limit }()
			sizes[i], errs[i] = sortOne(src, files[i])
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, st, err
	}
	for _, n := range sizes {
		st.sortedBytes += n
	}
	st.sortPhase = time.Since(t0)

	t1 := time.Now()
	d, err := merge(files)
	st.mergePhase = time.Since(t1)
	return d, st, err
}

// sortMergeObjects lists the log's sealed segments whose max commit ts is
// above start (TiCDC's shouldOpen on the ts in an object's name); active
// segments are always kept, as TiCDC keeps .tmp files.
func sortMergeObjects(ctx context.Context, b *blob.Bucket, logID string, start uint64) ([]string, error) {
	log, err := redokit.Open(ctx, b, logID)
	if err != nil {
		return nil, err
	}
	var keys []string
	for s, err := range log.Segments(ctx) {
		if err != nil {
			return nil, err
		}
		if s.NameErr != nil {
			return nil, s.NameErr
		}
		if s.Name.Active || s.Name.MaxTs > start {
			keys = append(keys, s.Key)
		}
	}
	return keys, nil
}

// sortObject is one worker's job: download the whole object, decode every
// record into an event of its own, sort them, and write those in
// (start, end] to path. It returns the bytes written.
func sortObject(ctx context.Context, b *blob.Bucket, key string, start, end uint64, path string) (int64, error) {
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		return 0, err
	}
	sr, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), &segment.ReaderOptions{Object: key})
	if err != nil {
		return 0, err
	}
	// Every event is held, decoded, until the object is sorted and
	// written: this is where TiCDC's reader spends its memory.
	evs := make([]*codec.Event, 0, sr.Footer().Records)
	var dec codec.Decoder
	for {
		rec, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
		ev := new(codec.Event)
		if err := dec.Decode(rec.Payload, ev); err != nil {
			return 0, fmt.Errorf("%s: %w", key, err)
		}
		evs = append(evs, ev)
	}
	return sortAndWriteFile(path, evs, compareRedoOrder, (*codec.Event).CommitTs, start, end, appendSortMergeFrame)
}

// appendSortMergeFrame appends ev to dst in the sorted files' framing: its
// encoded length (sortMergeFrameSize bytes, little-endian), then
// codec.AppendEvent's encoding.
func appendSortMergeFrame(dst []byte, ev *codec.Event) []byte {
	at := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = codec.AppendEvent(dst, ev)
	binary.LittleEndian.PutUint32(dst[at:], uint32(len(dst)-at-sortMergeFrameSize))
	return dst
}

// sortAndWriteFile is the end of a sort worker's job in both models (TiCDC's
// sortAndWriteFile): sort the decoded records by compare, then write those
// whose commit ts is in (start, end] to path, each framed by appendFrame,
// through a sortMergeWriteBuf buffer. It returns the bytes written.
func sortAndWriteFile[T any](path string, recs []*T, compare func(a, b *T) int, commitTs func(*T) uint64, start, end uint64, appendFrame func(dst []byte, rec *T) []byte) (int64, error) {
	slices.SortFunc(recs, compare)

	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, sortMergeWriteBuf)
	var buf []byte
	var n int64
	for _, rec := range recs {
		ts := commitTs(rec)
		if ts > end {
			break // sorted: the rest are above the range too
		}
		if ts <= start {
			continue
		}
		buf = appendFrame(buf[:0], rec)
		if _, err := w.Write(buf); err != nil {
			return 0, err
		}
		n += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return n, f.Close()
}

// compareRedoOrder is TiCDC's order of redo rows: commit ts, then start
// ts, then delete < update < insert within a transaction (its logHeap.Less).
// DDLs have no images and sort by their ts like rows.
func compareRedoOrder(a, b *codec.Event) int {
	if c := cmp.Compare(a.CommitTs(), b.CommitTs()); c != 0 {
		return c
	}
	if c := cmp.Compare(a.StartTs(), b.StartTs()); c != 0 {
		return c
	}
	return cmp.Compare(opRank(a), opRank(b))
}

func opRank(ev *codec.Event) int {
	if ev.IsDDL() {
		return 0
	}
	switch ev.Row.Op() {
	case codec.OpDelete:
		return 0
	case codec.OpUpdate:
		return 1
	default:
		return 2
	}
}

// sortedCursor is one sorted file in a merge: its reader and the record
// at its head, decoded (a codec.Event here, a RedoLog in ticdcmerge.go).
type sortedCursor[T any] struct {
	f   *os.File
	r   *bufio.Reader
	buf []byte
	rec T
}

// nextSortedEvent decodes c's next framed event (appendSortMergeFrame) into
// c.rec; io.EOF at the end.
func nextSortedEvent(c *sortedCursor[codec.Event], dec *codec.Decoder) error {
	var hdr [sortMergeFrameSize]byte
	if _, err := io.ReadFull(c.r, hdr[:]); err != nil {
		return err // io.EOF exactly at a frame boundary: the end
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	c.buf = slices.Grow(c.buf[:0], int(n))[:n]
	if _, err := io.ReadFull(c.r, c.buf); err != nil {
		return fmt.Errorf("%s: torn frame: %w", c.f.Name(), err)
	}
	return dec.Decode(c.buf, &c.rec)
}

// cursorHeap orders the cursors by their head records (compare).
type cursorHeap[T any] struct {
	cs      []*sortedCursor[T]
	compare func(a, b *T) int
}

func (h *cursorHeap[T]) Len() int           { return len(h.cs) }
func (h *cursorHeap[T]) Less(i, j int) bool { return h.compare(&h.cs[i].rec, &h.cs[j].rec) < 0 }
func (h *cursorHeap[T]) Swap(i, j int)      { h.cs[i], h.cs[j] = h.cs[j], h.cs[i] }
func (h *cursorHeap[T]) Push(x any)         { h.cs = append(h.cs, x.(*sortedCursor[T])) }
func (h *cursorHeap[T]) Pop() any {
	old := h.cs
	x := old[len(old)-1]
	h.cs = old[:len(old)-1]
	return x
}

// mergeSorted is the k-way heap merge of the sorted files both models
// share: each file is read through a sortMergeReadBuf bufio.Reader, next
// decodes a file's next record into its cursor (io.EOF at the end), and
// every record goes, in compare's order, to yield.
func mergeSorted[T any](paths []string, next func(c *sortedCursor[T]) error, compare func(a, b *T) int, yield func(rec *T)) error {
	h := &cursorHeap[T]{cs: make([]*sortedCursor[T], 0, len(paths)), compare: compare}
	defer func() {
		for _, c := range h.cs {
			c.f.Close()
		}
	}()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		c := &sortedCursor[T]{f: f, r: bufio.NewReaderSize(f, sortMergeReadBuf)}
		if err := next(c); err == io.EOF {
			f.Close()
			continue
		} else if err != nil {
			f.Close()
			return err
		}
		h.cs = append(h.cs, c)
	}
	heap.Init(h)
	for len(h.cs) > 0 {
		c := h.cs[0]
		yield(&c.rec)
		switch err := next(c); err {
		case nil:
			heap.Fix(h, 0)
		case io.EOF:
			c.f.Close()
			heap.Pop(h)
		default:
			return err
		}
	}
	return nil
}

// mergeSortedFiles merges the sorted files of redokit's events: it folds
// each event in (start, end], in order, into the digest it returns.
func mergeSortedFiles(paths []string, start, end uint64) (*eventDigest, error) {
	var dec codec.Decoder
	d := &eventDigest{}
	err := mergeSorted(paths,
		func(c *sortedCursor[codec.Event]) error { return nextSortedEvent(c, &dec) },
		compareRedoOrder,
		func(ev *codec.Event) {
			if ts := ev.CommitTs(); ts > start && ts <= end {
				d.add(ev)
			}
		})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// eventDigest summarises a stream of events so that two readers of one log
// can be checked to yield the same events in commit-ts order: the count,
// whether any commit ts went down, a hash of the commit-ts sequence (which
// depends on the order) and a sum of a hash of each event's identity (which
// does not, as readers may order the events of one commit ts differently).
type eventDigest struct {
	events, rows, ddls int64
	outOfOrder         int64 // events whose commit ts is below the previous one's
	lastTs             uint64
	tsSeq              uint64
	idSum              uint64
}

func (d *eventDigest) add(ev *codec.Event) {
	// An event's identity: its ts, table and, for a row, its first column
	// (the generated rows' unique id), or a DDL's query length.
	var key uint64
	if ev.IsDDL() {
		key = uint64(len(ev.DDL.Query))
	} else {
		cols := ev.Row.Columns
		if len(cols) == 0 {
			cols = ev.Row.PreColumns
		}
		if len(cols) > 0 && cols[0].Value.Kind() == codec.KindInt {
			key = uint64(cols[0].Value.Int())
		}
	}
	d.addID(ev.CommitTs(), ev.StartTs(), ev.TableName().PhysicalID, key, ev.IsDDL())
}

// addID folds one event, given by its identity, into the digest: add's
// work, shared with addRedoLog (an event in TiCDC's msgp shape).
func (d *eventDigest) addID(ts, startTs uint64, tableID int64, key uint64, ddl bool) {
	if ts < d.lastTs {
		d.outOfOrder++
	}
	d.lastTs = ts
	d.tsSeq = mix64(d.tsSeq ^ ts)
	d.events++
	if ddl {
		d.ddls++
	} else {
		d.rows++
	}
	d.idSum += mix64(ts ^ mix64(startTs^mix64(uint64(tableID)^mix64(key))))
}

// mix64 is SplitMix64's finalizer: a cheap 64-bit hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// sameAs says how d differs from want, the digest of redokit's reader on
// the same log and range; nil when they agree.
func (d *eventDigest) sameAs(want *eventDigest) error {
	switch {
	case d.events != want.events || d.rows != want.rows || d.ddls != want.ddls:
		return fmt.Errorf("%d events (%d rows, %d DDLs), redokit's reader read %d (%d rows, %d DDLs)", d.events, d.rows, d.ddls, want.events, want.rows, want.ddls)
	case d.outOfOrder != 0:
		return fmt.Errorf("%d events out of commit-ts order", d.outOfOrder)
	case want.outOfOrder != 0:
		return fmt.Errorf("redokit's reader yielded %d events out of commit-ts order", want.outOfOrder)
	case d.tsSeq != want.tsSeq:
		return errors.New("the sequence of commit ts differs from redokit's reader's")
	case d.idSum != want.idSum:
		return errors.New("the same count and commit ts as redokit's reader, but other events")
	}
	return nil
}
