package sinkgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
)

// Eviction (see the package doc). The log owns a set of commit-ts ranges,
// the windows: the gate holds none of its events in them and reads them
// back from the log instead. A whole commit ts, never part of one: at one
// commit ts the log holds the gate's events in the order the writer took
// them (rows before DDLs, then arrival), which is the order the gate
// releases them in, so a read-back of a whole range puts each event where
// it would have gone. The rules that keep every event in exactly one place:
//
//   - a held event above the released ts is never in a window (eviction
//     takes them, and settleLocked takes those a span joining behind G
//     wrote there), and windows only ever reach down to what is above the
//     released ts when they are made or grown;
//   - an event a Write brings into a window is the log's (ownerLocked),
//     except one at or below the released ts inside the range a read-back
//     is reading: its listing was made before the span that wrote it was
//     added (rbMu), so it cannot hold it, and the gate releases it as it
//     releases every event a span catching up behind G writes;
//   - a read-back reads only up to what the writer has flushed, after a
//     flush that took every span added behind it (flushedForRead): so
//     every event it must find is in the log.

// window is a commit-ts range the log owns.
type window struct {
	lo, hi uint64 // the part not delivered yet; empty when lo > hi
	n      int64  // the gate's events in it, not delivered yet
	skip   int64  // events at lo already delivered (a batch ended inside lo)
	// loose: n is not exact, because a span was removed with events above
	// its resolved ts in the range, which the log may or may not hold.
	loose bool
	// err is a disagreement between the log and n: the gate cannot tell
	// what is missing, so every release fails with it.
	err error
}

// setLog sets up eviction to l, or says in spillOff why there is none.
func (g *Gate) setLog(l Log) {
	lw, ok := g.w.(LogWriter)
	switch {
	case l == nil:
		g.spillOff = "no Options.Log to evict them to"
	case l.Bucket() == nil:
		g.spillOff = "Options.Log has no bucket"
	case !ok:
		g.spillOff = fmt.Sprintf("the redo writer (%T) does not implement sinkgate.LogWriter, which reading its events back needs", g.w)
	case l.ID() != lw.LogID():
		g.spillOff = fmt.Sprintf("Options.Log is log %q, but the writer writes log %q", l.ID(), lw.LogID())
	default:
		g.lw, g.bucket, g.logID, g.writerID, g.epoch = lw, l.Bucket(), l.ID(), lw.ID(), lw.Epoch()
	}
}

// ownerLocked returns the window that owns an event of commit ts ts a
// Write brings, or nil when the gate holds it. The caller holds mu.
func (g *Gate) ownerLocked(ts uint64) *window {
	for _, w := range g.windows {
		if ts < w.lo {
			return nil // sorted
		}
		if ts > w.hi {
			continue
		}
		if ts <= g.released && g.reading.on && g.reading.lo <= ts && ts <= g.reading.hi {
			return nil
		}
		return w
	}
	return nil
}

// evictLocked evicts the held events of the span holding the most bytes
// above the released ts, counting as s's the events of the Write it is
// making room for (encs at tss), which then need no room either: the log
// owns their whole commit-ts range, and every held event in it, whatever
// its span, goes too. false means there was nothing to evict. The caller
// holds mu.
func (g *Gate) evictLocked(s *spanQ, encs [][]byte, tss []uint64, n int64) bool {
	var best *spanQ
	var bestB int64
	var bestLo, bestHi uint64
	for _, q := range g.queues() {
		var b int64
		var lo, hi uint64
		any := false
		note := func(ts uint64, size int) {
			b += int64(size)
			if !any {
				lo, hi, any = ts, ts, true
			}
			lo, hi = min(lo, ts), max(hi, ts)
		}
		for i := q.head + q.inflight; i < len(q.q); i++ {
			if h := &q.q[i]; h.ts > g.released {
				note(h.ts, len(h.data))
			}
		}
		if q == s {
			for i := range tss {
				if tss[i] > g.released && g.ownerLocked(tss[i]) == nil {
					note(tss[i], len(encs[i]))
				}
			}
		}
		if any && b > bestB {
			best, bestB, bestLo, bestHi = q, b, lo, hi
		}
	}
	if best == nil {
		return false
	}
	w := g.addWindowLocked(bestLo, bestHi)
	evicted, bytes := g.evictRangeLocked(w)
	g.stats.evictions++
	g.log.Info("sinkgate: held events fill MaxHeldBytes; evicting to the log",
		"span", best.id, "span_bytes", bestB, "from_ts", w.lo, "to_ts", w.hi,
		"evicted", evicted, "freed", bytes, "write_span", s.id, "write_bytes", n, "held", g.heldB)
	return true
}

// addWindowLocked makes [lo, hi] (above the released ts) the log's: it
// merges it with every window not wholly at or below the released ts (the
// held events between them are above it too, so they can go), or adds it
// after the others. It returns the window. The caller holds mu.
func (g *Gate) addWindowLocked(lo, hi uint64) *window {
	var into *window
	out := make([]*window, 0, len(g.windows)+1)
	for _, w := range g.windows {
		switch {
		case w.lo > w.hi && w.err == nil:
			// Delivered.
		case w.hi < g.released || w.err != nil:
			out = append(out, w)
		case into == nil:
			into = w
			out = append(out, w)
		default:
			into.hi = max(into.hi, w.hi)
			into.n += w.n
			into.loose = into.loose || w.loose
		}
	}
	if into == nil {
		into = &window{lo: lo, hi: hi}
		out = append(out, into)
	} else {
		if lo < into.lo && into.skip == 0 {
			into.lo = lo
		}
		into.hi = max(into.hi, hi)
	}
	into.loose = into.loose || into.lo <= g.looseUntil
	g.windows = out
	return into
}

// evictRangeLocked hands w every held event in its range above the
// released ts (not in a batch being applied: those are at or below it),
// and returns how many and their bytes. The caller holds mu.
func (g *Gate) evictRangeLocked(w *window) (n, bytes int64) {
	for _, q := range g.queues() {
		start := q.head + q.inflight
		j := start
		for i := start; i < len(q.q); i++ {
			h := q.q[i]
			if h.ts > g.released && w.lo <= h.ts && h.ts <= w.hi {
				n++
				bytes += int64(len(h.data))
				q.noteLog(h.ts)
				continue
			}
			q.q[j] = h
			j++
		}
		clear(q.q[j:])
		q.q = q.q[:j]
	}
	w.n += n
	g.stats.evicted += n
	g.free(n, bytes)
	return n, bytes
}

// settleLocked ends a release: the held events inside a window's part not
// delivered yet (events a span that joined behind G wrote while a read-back
// was reading there, when the read-back stopped short) become the log's,
// and delivered windows go. The caller holds mu; no batch is in flight.
func (g *Gate) settleLocked() {
	for _, w := range g.windows {
		if w.lo > w.hi {
			continue
		}
		var n, bytes int64
		for _, q := range g.queues() {
			start := q.head + q.inflight
			j := start
			for i := start; i < len(q.q); i++ {
				h := q.q[i]
				if w.lo <= h.ts && h.ts <= w.hi {
					n++
					bytes += int64(len(h.data))
					q.noteLog(h.ts)
					continue
				}
				q.q[j] = h
				j++
			}
			clear(q.q[j:])
			q.q = q.q[:j]
		}
		w.n += n
		g.stats.evicted += n
		g.free(n, bytes)
	}
	g.windows = slices.DeleteFunc(g.windows, func(w *window) bool { return w.lo > w.hi && w.err == nil })
}

// loosenLocked notes that the gate's windows at or below ts cannot count
// their events exactly. The caller holds mu.
func (g *Gate) loosenLocked(ts uint64) {
	g.looseUntil = max(g.looseUntil, ts)
	for _, w := range g.windows {
		if w.lo <= ts {
			w.loose = true
		}
	}
}

// flushedForRead returns the ts up to which every event the writer took is
// in the log: its flushed ts, after a flush when a span was added behind
// it since the last one (until then the flushed ts says nothing of that
// span's events). 0 means none can be trusted now (the gate is closing).
func (g *Gate) flushedForRead(ctx context.Context) (uint64, error) {
	g.mu.Lock()
	closed, gen := g.closed, g.behind
	need := g.behind != g.flushedBehind
	g.mu.Unlock()
	if closed {
		// Close closed the writer (whose last flush took every span)
		// before it releases; a release still running then stops here.
		g.mu.Lock()
		final := g.final
		g.mu.Unlock()
		if final {
			return g.w.FlushedTs(), nil
		}
		return 0, nil
	}
	if !need {
		return g.w.FlushedTs(), nil
	}
	ts, err := g.lw.Flush(ctx)
	if err != nil {
		g.mu.Lock()
		closed = g.closed
		g.mu.Unlock()
		if closed {
			return 0, nil
		}
		return 0, fmt.Errorf("sinkgate: flush the writer before reading back from the log: %w", err)
	}
	g.mu.Lock()
	g.flushedBehind = max(g.flushedBehind, gen)
	g.mu.Unlock()
	return ts, nil
}

// tableSet is what a read-back keeps: the events of the gate's spans'
// tables, and of a removed span's only up to its resolved ts (above it the
// gate dropped them; the log may still hold those the writer staged).
type tableSet struct {
	live map[codec.TableName]struct{}
	upTo map[codec.TableName]uint64 // removed spans' tables: up to their resolved ts
}

// tablesLocked returns the gate's tableSet now. The caller holds mu.
func (g *Gate) tablesLocked() *tableSet {
	t := &tableSet{live: map[codec.TableName]struct{}{}, upTo: map[codec.TableName]uint64{}}
	for _, s := range g.spans {
		for name := range s.tables {
			t.live[name] = struct{}{}
		}
	}
	for _, s := range g.retired {
		for name := range s.tables {
			t.upTo[name] = max(t.upTo[name], s.resolved)
		}
	}
	return t
}

// table is the reader's TableFilter: called from its goroutines, it only
// reads.
func (t *tableSet) table(name codec.TableName) bool {
	if _, ok := t.live[name]; ok {
		return true
	}
	_, ok := t.upTo[name]
	return ok
}

// accept reports whether ev is one of the gate's.
func (t *tableSet) accept(ev *codec.Event) bool {
	ts := ev.CommitTs()
	ok := func(name codec.TableName) bool {
		if _, ok := t.live[name]; ok {
			return true
		}
		r, ok := t.upTo[name]
		return ok && ts <= r
	}
	if !ev.IsDDL() {
		return ok(ev.Row.Table)
	}
	if ok(ev.DDL.Table) {
		return true
	}
	for _, x := range ev.DDL.Tables {
		if ok(x.TableName) {
			return true
		}
	}
	return false
}

// readBack delivers the events of window w up to target from the log: a
// reader over (w.lo-1, end], end as far as target, the window and what the
// writer flushed allow, keeping this writer epoch's events of the gate's
// tables, in the reader's order, which at one commit ts is the order the
// writer took them in. Batches end at a commit-ts boundary once they hold
// MaxBatch events, or inside a commit ts when the next event does not fit
// in MaxHeldBytes beside what the gate holds. It returns end (w.lo-1 when
// it could read nothing). A read error is returned as it is: the reader
// proves the range complete before it returns an event (reader.ErrUnproven,
// reader.ErrIncomplete, ...), and nothing is skipped.
func (g *Gate) readBack(ctx context.Context, w *window, target uint64) (uint64, error) {
	g.rbMu.Lock()
	flushed, err := g.flushedForRead(ctx)
	if err != nil {
		g.rbMu.Unlock()
		return 0, err
	}
	g.mu.Lock()
	lo, skip := w.lo, w.skip
	end := min(target, w.hi, flushed)
	if end < lo {
		g.mu.Unlock()
		g.rbMu.Unlock()
		return lo - 1, nil
	}
	g.reading.on, g.reading.lo, g.reading.hi = true, lo, end
	tabs := g.tablesLocked()
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.reading.on = false
		g.mu.Unlock()
	}()
	r, err := reader.Open(ctx, g.bucket, &reader.Options{
		LogID: g.logID, StartTs: lo - 1, EndTs: end,
		// Only this writer epoch's events are the gate's, and one epoch
		// never holds a copy of its own event: what the reader would
		// take for duplicates here are distinct events.
		KeepDuplicates: true,
		TableFilter:    tabs.table,
		Prefetch:       1,
		Lookahead:      -1,
		Logger:         g.log,
	})
	g.rbMu.Unlock()
	if err != nil {
		return 0, g.readErr(lo, end, err)
	}
	defer r.Close()

	var (
		batch   []codec.Event
		bytes   int64  // their encoded bytes, taken in heldB
		lastTs  = lo   // commit ts of the last event taken
		atLast  = skip // events at lastTs delivered or in the batch
		skipped int64
	)
	defer func() {
		if bytes > 0 {
			g.mu.Lock()
			g.heldB -= bytes
			g.broadcast()
			g.mu.Unlock()
		}
	}()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		g.mu.Lock()
		if !w.loose && int64(len(batch)) > w.n {
			w.err = fmt.Errorf("sinkgate: read back (%d, %d] of log %s: the log holds more events of writer %s epoch %d in the gate's tables than the gate gave it (%d left); the gate cannot tell which to deliver",
				lo-1, end, g.logID, g.writerID, g.epoch, w.n)
			err := w.err
			g.mu.Unlock()
			return err
		}
		g.mu.Unlock()
		if err := g.down.Apply(ctx, batch); err != nil {
			return fmt.Errorf("sinkgate: downstream: %w", err)
		}
		g.mu.Lock()
		w.n -= int64(len(batch))
		w.lo, w.skip = lastTs, atLast
		for _, q := range g.queues() {
			if q.inLog && q.winLo < lastTs {
				q.winLo = lastTs
			}
		}
		g.heldB -= bytes
		g.broadcast()
		g.stats.released += int64(len(batch))
		g.stats.readBack += int64(len(batch))
		g.stats.batches++
		g.mu.Unlock()
		clear(batch)
		batch, bytes = batch[:0], 0
		return nil
	}
	for {
		ev, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, g.readErr(lo, end, err)
		}
		if n := ev.Source.Name; n.WriterID != g.writerID || n.Epoch != g.epoch || !tabs.accept(&ev.Event) {
			continue
		}
		ts := ev.CommitTs()
		if ts == lo && skipped < skip {
			skipped++ // delivered before a failure
			continue
		}
		size := int64(len(ev.Payload()))
		if len(batch) > 0 && (ts != lastTs && len(batch) >= g.o.MaxBatch || !g.take1(size, false)) {
			if err := flush(); err != nil {
				return 0, err
			}
		}
		if len(batch) == 0 {
			g.take1(size, true) // the first of a batch goes alone if it must
		}
		batch = append(batch, *ev.Event.Clone())
		bytes += size
		if ts != lastTs {
			lastTs, atLast = ts, 0
		}
		atLast++
	}
	if err := flush(); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	w.lo, w.skip = end+1, 0
	for _, q := range g.queues() {
		switch {
		case !q.inLog:
		case q.winHi <= end:
			q.inLog = false
		case q.winLo <= end:
			q.winLo = end + 1
		}
	}
	if w.lo > w.hi {
		if !w.loose && w.n != 0 {
			w.err = fmt.Errorf("sinkgate: read back up to %d of log %s: %d events of writer %s epoch %d that the gate gave the log are not there (a segment lost, or the writer fenced)",
				end, g.logID, w.n, g.writerID, g.epoch)
			return 0, w.err
		}
		// A loose window's events left are those of removed spans above
		// their resolved ts that the log held not: dropped.
		g.stats.dropped += max(w.n, 0)
		g.windows = slices.DeleteFunc(g.windows, func(x *window) bool { return x == w })
	}
	return end, nil
}

// take1 takes size bytes of MaxHeldBytes for an event of a read-back batch
// if they fit, or (force) anyway, and reports whether it took them.
func (g *Gate) take1(size int64, force bool) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !force && g.heldB+size > g.o.MaxHeldBytes {
		return false
	}
	g.heldB += size
	return true
}

func (g *Gate) readErr(lo, end uint64, err error) error {
	return fmt.Errorf("sinkgate: read back (%d, %d] from log %s (writer %s, epoch %d): %w", lo-1, end, g.logID, g.writerID, g.epoch, err)
}
