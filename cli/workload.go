package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/testkit/workload"
	"github.com/redokit/redokit/writer"
)

// pipeline plays a CDC system's capture side for a generated workload: it
// routes each transaction's events to the writer that owns their span,
// advances every span's resolved ts behind it, keeps the coordinator told
// about writers and DDL barriers, and can kill and replace a writer.
type pipeline struct {
	log   *redokit.Log
	b     *blob.Bucket
	logID string
	cfg   workload.Config
	wopts writer.Options
	coord *meta.Coordinator
	slots []*wslot

	lastTs uint64 // commit ts of the last transaction routed
	txns   int64
	rows   int64
	ddls   int64
	// retired holds the stats of writers that were killed or closed, so
	// totals count every epoch.
	retired []writer.Stats
}

// wslot is one writer ID and the writer process currently holding it.
type wslot struct {
	id    string
	w     *writer.Writer
	spans map[uint64]bool // the spans it owns now
}

// ownerOf maps a span to the writer that owns it: the DDL span to the first
// writer, each part of the split table to a different writer, other tables
// round robin. It depends on the span alone, so a replay after a failover
// routes the same way.
func (p *pipeline) ownerOf(span uint64) int {
	if span == workload.DDLSpan {
		return 0
	}
	phys, part := workload.SpanTable(span)
	return int((uint64(phys) + uint64(part)) % uint64(len(p.slots)))
}

// writerIDs are w1, w2, ...
func writerID(i int) string { return fmt.Sprintf("w%d", i+1) }

// newPipeline opens the coordinator (creating the log's meta object at the
// workload's start ts) and one writer per slot. It refuses a log that
// already exists: the workload's timestamps would fall below its resolved ts.
func newPipeline(ctx context.Context, b *blob.Bucket, logID string, cfg workload.Config, writers int, wopts writer.Options, logger *slog.Logger) (*pipeline, error) {
	cfg = cfg.Normalize()
	log, err := redokit.Open(ctx, b, logID)
	if err != nil {
		return nil, err
	}
	if _, err := log.Meta(ctx); err == nil {
		return nil, fmt.Errorf("log %q already exists: pick another --log, or remove it first with redokit rm", logID)
	} else if !errors.Is(err, redokit.ErrNoLog) {
		return nil, fmt.Errorf("read the meta object of log %q: %w", logID, err)
	}
	coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: cfg.StartTs, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open the coordinator of log %q: %w", logID, err)
	}
	p := &pipeline{b: b, log: log, logID: logID, cfg: cfg, wopts: wopts, coord: coord, lastTs: cfg.StartTs}
	p.wopts.Logger = logger
	for i := range writers {
		id := writerID(i)
		if err := coord.AddWriter(ctx, id); err != nil {
			p.abort()
			return nil, err
		}
		w, err := log.OpenWriter(ctx, id, &p.wopts)
		if err != nil {
			p.abort()
			return nil, fmt.Errorf("open writer %s: %w", id, err)
		}
		p.slots = append(p.slots, &wslot{id: id, w: w, spans: map[uint64]bool{}})
	}
	// The DDL span exists from the start.
	if err := p.slots[0].w.AddSpan(writer.SpanID(workload.DDLSpan), cfg.StartTs); err != nil {
		p.abort()
		return nil, err
	}
	p.slots[0].spans[workload.DDLSpan] = true
	return p, nil
}

// route hands one transaction to the writers: to every writer when only is
// negative, else to writer only (a replacement replaying its spans). A DDL
// that creates tables holds the watermark with a barrier until the new spans
// exist, the way a CDC owner must (the new table's rows may reach another
// writer before the DDL is flushed).
func (p *pipeline) route(ctx context.Context, tx *workload.Txn, only int) error {
	all := only < 0
	take := func(span uint64) (*wslot, bool) {
		i := p.ownerOf(span)
		return p.slots[i], all || i == only
	}
	barrier := ""
	if tx.Creates && all {
		barrier = fmt.Sprintf("ddl-%d", tx.CommitTs)
		if err := p.coord.AddBarrier(ctx, barrier, tx.CommitTs); err != nil {
			return fmt.Errorf("DDL barrier at %d: %w", tx.CommitTs, err)
		}
	}
	// Rows (or the DDL) grouped by span, in the order they came.
	var order []uint64
	bySpan := map[uint64][]codec.Event{}
	for _, ch := range tx.Changes {
		if _, ok := bySpan[ch.Span]; !ok {
			order = append(order, ch.Span)
		}
		bySpan[ch.Span] = append(bySpan[ch.Span], ch.Event)
	}
	for _, span := range order {
		s, ok := take(span)
		if !ok {
			continue
		}
		if err := s.w.Write(ctx, writer.SpanID(span), bySpan[span]...); err != nil {
			return fmt.Errorf("writer %s: %w", s.id, err)
		}
	}
	for _, span := range tx.DroppedSpans {
		s, ok := take(span)
		if !ok || !s.spans[span] {
			continue
		}
		// Nothing of a dropped table comes at or after the DROP: resolve
		// the span there so what it holds is flushed, then let it go.
		if err := s.w.AdvanceResolved(writer.SpanID(span), tx.CommitTs); err != nil {
			return err
		}
		if err := s.w.RemoveSpan(writer.SpanID(span)); err != nil {
			return err
		}
		delete(s.spans, span)
	}
	for _, span := range tx.NewSpans {
		s, ok := take(span)
		if !ok {
			continue
		}
		if err := s.w.AddSpan(writer.SpanID(span), tx.CommitTs); err != nil {
			return fmt.Errorf("writer %s: %w", s.id, err)
		}
		s.spans[span] = true
	}
	if barrier != "" {
		if err := p.coord.ReleaseBarrier(ctx, barrier); err != nil {
			return err
		}
	}
	// Every span has seen all its events at this ts: resolve them all.
	for i, s := range p.slots {
		if !all && i != only {
			continue
		}
		for span := range s.spans {
			if err := s.w.AdvanceResolved(writer.SpanID(span), tx.CommitTs); err != nil {
				return fmt.Errorf("writer %s: %w", s.id, err)
			}
		}
	}
	if all {
		p.lastTs = tx.CommitTs
		p.txns++
		if tx.DDL {
			p.ddls++
		} else {
			p.rows += int64(len(tx.Changes))
		}
	}
	return nil
}

// flushAll makes everything routed so far durable and returns the global
// resolved ts the coordinator then computes.
func (p *pipeline) flushAll(ctx context.Context) (uint64, error) {
	for _, s := range p.slots {
		if _, err := s.w.Publish(ctx); err != nil {
			return 0, fmt.Errorf("flush writer %s: %w", s.id, err)
		}
	}
	m, err := p.coord.Tick(ctx)
	if err != nil {
		return 0, err
	}
	return m.ResolvedTs, nil
}

// failover records what happened to a killed writer.
type failover struct {
	Writer        string      `json:"writer"`
	OldEpoch      uint64      `json:"old_epoch"`
	NewEpoch      uint64      `json:"new_epoch"`
	FlushedBefore uint64      `json:"flushed_ts_before,string"` // the dead writer's durable flushed ts (as its successor found it in its segments)
	RestartTs     uint64      `json:"restart_ts,string"`        // where the replacement restarted its spans (the checkpoint)
	Rewritten     int64       `json:"rewritten_events"`         // events the replacement wrote again from the restart ts
	Lost          int64       `json:"lost_events"`              // accepted by the dead writer, never made durable
	Fences        []fenceJSON `json:"fences"`                   // the fences of the writer ID after the takeover
}

// killAndReplace kills writer victim the way a crash does (its unflushed
// events are lost, its active segment stays unsealed), takes its writer ID
// with a new epoch — which fences the old process and recovers what it left
// — and has the new process rewrite its spans from restartTs (the log's
// checkpoint), as a CDC system restarts a failed capture's tables. Events
// the dead writer had already made durable in (restartTs, its flushed ts]
// are written twice: the reader drops the copies.
func (p *pipeline) killAndReplace(ctx context.Context, victim int, restartTs uint64) (*failover, error) {
	s := p.slots[victim]
	fo := &failover{Writer: s.id, OldEpoch: s.w.Epoch(), RestartTs: restartTs}
	dead := s.w
	// Kill: a closed context makes Close abort at once, leaving what it
	// had not flushed unwritten and the active segment unsealed.
	killed, cancel := context.WithCancel(ctx)
	cancel()
	_ = dead.Close(killed)
	p.retired = append(p.retired, dead.Stats())
	// What the dead writer reported durable is what its state object says
	// (an aborted Close may still have finished a flush): the events above
	// it were lost with the process.
	ws, _, err := meta.ReadWriterState(ctx, p.b, p.logID, s.id)
	if err != nil {
		return nil, fmt.Errorf("read the state of writer %s: %w", s.id, err)
	}
	fo.FlushedBefore = ws.FlushedTs

	// Take the writer ID over: a new epoch, which fences the dead one
	// (were it a zombie still running, it could publish nothing more),
	// recovers its unsealed segment and seals it.
	w, err := p.log.OpenWriter(ctx, s.id, &p.wopts)
	if err != nil {
		return nil, fmt.Errorf("take over writer %s: %w", s.id, err)
	}
	fo.NewEpoch = w.Epoch()
	s.w, s.spans = w, map[uint64]bool{}
	if ws, _, err := meta.ReadWriterState(ctx, p.b, p.logID, s.id); err == nil {
		fo.Fences = fencesJSON(ws.Fences)
		// The new epoch starts at the old one's durable progress, read
		// from its segments: with lazy publication that may be past what
		// its state object said when it died.
		fo.FlushedBefore = max(fo.FlushedBefore, ws.FlushedTs)
	}

	// Ask the "upstream" again for the victim's spans from the restart ts:
	// a fresh generator skipped to it knows which spans existed then.
	g := workload.New(p.cfg)
	g.SkipTo(restartTs)
	if p.ownerOf(workload.DDLSpan) == victim {
		if err := w.AddSpan(writer.SpanID(workload.DDLSpan), restartTs); err != nil {
			return nil, err
		}
		s.spans[workload.DDLSpan] = true
	}
	for _, span := range g.Spans() {
		if p.ownerOf(span) != victim {
			continue
		}
		if err := w.AddSpan(writer.SpanID(span), restartTs); err != nil {
			return nil, err
		}
		s.spans[span] = true
	}
	for {
		ts, ok := g.PeekTs()
		if !ok || ts > p.lastTs {
			break
		}
		tx, _ := g.Next()
		for _, ch := range tx.Changes {
			if p.ownerOf(ch.Span) == victim {
				fo.Rewritten++
				if tx.CommitTs > fo.FlushedBefore {
					fo.Lost++
				}
			}
		}
		if err := p.route(ctx, tx, victim); err != nil {
			return nil, fmt.Errorf("replay writer %s's spans: %w", s.id, err)
		}
	}
	return fo, nil
}

// closeAll closes every writer (flushing and sealing) and returns the final
// global resolved ts.
func (p *pipeline) closeAll(ctx context.Context) (uint64, error) {
	var errs []error
	for _, s := range p.slots {
		if s.w == nil {
			continue
		}
		if err := s.w.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close writer %s: %w", s.id, err))
		}
		p.retired = append(p.retired, s.w.Stats())
		s.w = nil
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	m, err := p.coord.Tick(ctx)
	if err != nil {
		return 0, err
	}
	// Release the writers: no process holds them any more, and a writer
	// the meta object still lists as live makes rm refuse for 30 s. Their
	// progress stays in their state objects, which readers go by; the
	// global resolved ts computed above never goes back.
	for _, s := range p.slots {
		if err := p.coord.RemoveWriter(ctx, s.id); err != nil {
			return 0, fmt.Errorf("release writer %s of log %s: %w", s.id, p.logID, err)
		}
	}
	return m.ResolvedTs, nil
}

// abort stops every writer without flushing (on an error path).
func (p *pipeline) abort() {
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	for _, s := range p.slots {
		if s.w != nil {
			_ = s.w.Close(dead)
			s.w = nil
		}
	}
}

// writeTotals sums the writer stats of every epoch of every writer.
type writeTotals struct {
	Events       int64 `json:"events"`
	PayloadBytes int64 `json:"payload_bytes"` // encoded events
	StoredBytes  int64 `json:"stored_bytes"`  // segment bytes written (compressed)
	Segments     int64 `json:"segments"`
	Blocks       int64 `json:"blocks"`
	Flushes      int64 `json:"flushes"`
}

func (p *pipeline) totals() writeTotals {
	var t writeTotals
	all := append([]writer.Stats(nil), p.retired...)
	for _, s := range p.slots {
		if s.w != nil {
			all = append(all, s.w.Stats())
		}
	}
	for _, st := range all {
		t.Events += st.Events
		t.PayloadBytes += st.PayloadBytes
		t.StoredBytes += st.StoredBytes
		t.Segments += st.Segments
		t.Blocks += st.Blocks
		t.Flushes += st.Flushes
	}
	return t
}

// ratio is the compression ratio of the stored segments.
func (t writeTotals) ratio() float64 {
	if t.StoredBytes == 0 {
		return 0
	}
	return float64(t.PayloadBytes) / float64(t.StoredBytes)
}

// runCoordinator ticks the coordinator in the background until stop is
// called, as a CDC owner does.
func (p *pipeline) runCoordinator(ctx context.Context, every time.Duration) (stop func()) {
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.coord.Run(cctx, every)
	}()
	return func() {
		cancel()
		<-done
	}
}
