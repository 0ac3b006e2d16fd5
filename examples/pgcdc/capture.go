package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/writer"
)

// tableSpans is one captured table's spans: one, or several by ranges of
// an integer key column.
type tableSpans struct {
	name   string
	first  meta.SpanID
	keyCol string  // the column the ranges split; "" for one span
	bounds []int64 // span first+i holds the keys below bounds[i]; the last one the rest
}

func (t *tableSpans) count() int { return len(t.bounds) + 1 }

// span returns the span of a row whose split key is key.
func (t *tableSpans) span(key int64) meta.SpanID {
	i, found := slices.BinarySearch(t.bounds, key)
	if found {
		i++ // a bound is the first key of the next span
	}
	return t.first + meta.SpanID(i)
}

// spanMap assigns the captured tables their spans (IDs from 1, in the order
// of -tables) and the spans their writers (round robin), the same in every
// process of one deployment.
type spanMap struct {
	tables  map[string]*tableSpans
	all     []meta.SpanID
	writers int
}

// parseTables reads -tables: "t1,t2:key:b1:b2,…" (a table with a key column
// and bounds is split into len(bounds)+1 spans by ranges of the key).
func parseTables(spec string, writers int) (*spanMap, error) {
	m := &spanMap{tables: map[string]*tableSpans{}, writers: max(writers, 1)}
	next := meta.SpanID(1)
	for _, item := range strings.Split(spec, ",") {
		parts := strings.Split(strings.TrimSpace(item), ":")
		if parts[0] == "" {
			return nil, fmt.Errorf("-tables %q: an empty table name", spec)
		}
		t := &tableSpans{name: parts[0], first: next}
		if _, dup := m.tables[t.name]; dup {
			return nil, fmt.Errorf("-tables: table %s is listed twice", t.name)
		}
		if len(parts) == 2 {
			return nil, fmt.Errorf("-tables: table %s: a key column needs bounds (%s:%s:b1:b2…)", t.name, t.name, parts[1])
		}
		if len(parts) > 2 {
			t.keyCol = parts[1]
			for _, b := range parts[2:] {
				v, err := strconv.ParseInt(b, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("-tables: table %s: bound %q is not an integer", t.name, b)
				}
				if len(t.bounds) > 0 && v <= t.bounds[len(t.bounds)-1] {
					return nil, fmt.Errorf("-tables: table %s: bounds must increase (%d after %d)", t.name, v, t.bounds[len(t.bounds)-1])
				}
				t.bounds = append(t.bounds, v)
			}
		}
		m.tables[t.name] = t
		for range t.count() {
			m.all = append(m.all, next)
			next++
		}
	}
	return m, nil
}

func (m *spanMap) owner(s meta.SpanID) int { return int(s-1) % m.writers }

func (m *spanMap) owned(w int) []meta.SpanID {
	var out []meta.SpanID
	for _, s := range m.all {
		if m.owner(s) == w {
			out = append(out, s)
		}
	}
	return out
}

func writerID(i int) string { return fmt.Sprintf("pgcdc-w%d", i) }

// captureStats are what a capture has done, for its report.
type captureStats struct {
	Events   atomic.Int64 // events written to the log (its own spans)
	Txns     atomic.Int64 // upstream transactions read
	Resolved atomic.Uint64
	Acked    atomic.Uint64 // the flush LSN last acknowledged
}

type relCol struct {
	name string
	ct   colType
	err  error // a type the capture cannot map: raised at the column's first value
	pk   bool
}

type relation struct {
	oid          uint32
	schema, name string
	cols         []relCol
	spans        *tableSpans // nil: not captured (an error at its first row)
	keyIdx       int         // the split key's column, -1 for one span
}

type spanEvents struct {
	span meta.SpanID
	evs  []codec.Event
}

// capturer is one capture: one replication slot read whole, the events of
// its own spans written through its gate; the other writers' events are
// dropped (each writer reads its own slot of the same stream).
type capturer struct {
	cfg     *config
	idx     int
	id      string
	spans   *spanMap
	own     map[meta.SpanID]bool
	gate    *sinkgate.Gate
	cat     *pgx.Conn // catalog lookups
	rels    map[uint32]*relation
	pks     map[uint32][]string // primary keys the DDL records named
	start   uint64              // events at or below are in the log already
	skipDDL map[uint64]bool     // -skip-ddl: commit LSNs whose untranslatable DDLs are left out
	stats   *captureStats
	logger  *slog.Logger

	resolved  uint64
	inTxn     bool
	commitLSN uint64
	txnRows   map[meta.SpanID][]codec.Event
	txnDDLs   []spanEvents
	nRows     int
}

// runCapture runs writer idx of the deployment until ctx ends or it fails.
// cp receives its gate's applied ts.
func runCapture(ctx context.Context, cfg *config, idx int, lg *redokit.Log, cp sinkgate.Checkpointer, stats *captureStats) (err error) {
	spans, err := parseTables(cfg.Tables, cfg.Writers)
	if err != nil {
		return err
	}
	skip, err := parseSkipDDL(cfg.SkipDDL)
	if err != nil {
		return err
	}
	c := &capturer{cfg: cfg, idx: idx, id: writerID(idx), spans: spans, own: map[meta.SpanID]bool{},
		rels: map[uint32]*relation{}, pks: map[uint32][]string{}, stats: stats, logger: cfg.Logger, skipDDL: skip}
	for _, s := range spans.owned(idx) {
		c.own[s] = true
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("capture %s: %w", c.id, err)
		}
	}()
	if c.cat, err = connect(ctx, cfg.PG); err != nil {
		return err
	}
	defer c.cat.Close(context.Background())
	// The coordinator records a snapshot pending before it creates the
	// log: once the log is there, the record says whether to wait.
	if _, err := waitMeta(ctx, lg, cfg.Tick, c.logger); err != nil {
		return err
	}
	snapLSN, err := waitSnapshot(ctx, cfg, c.logger)
	if err != nil {
		return err
	}
	slot := cfg.SlotPrefix + strconv.Itoa(idx)
	var confirmed string
	if err := c.cat.QueryRow(ctx, "SELECT coalesce(confirmed_flush_lsn, '0/0')::text FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&confirmed); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("replication slot %s does not exist: run the setup first", slot)
		}
		return err
	}
	lsn, err := pglogrepl.ParseLSN(confirmed)
	if err != nil {
		return fmt.Errorf("slot %s: confirmed flush LSN %q: %w", slot, confirmed, err)
	}
	// What the slot had confirmed is at or below the log's global
	// resolved ts, so the log holds it: the transactions the slot sends
	// again at or below it are skipped, those above written again (the
	// reader drops such copies).
	c.start = uint64(lsn)
	if snapLSN > 0 {
		// A slot made before the snapshot's temporary slot sends what
		// committed between them, which the snapshot holds.
		c.start = max(c.start, snapshotTs(snapLSN))
	}

	w, err := lg.OpenWriter(ctx, c.id, &writer.Options{FlushInterval: cfg.FlushInterval, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	down := &lazySink{uri: cfg.Sink, opts: &apply.SinkOptions{LogID: lg.ID()}}
	defer down.Close()
	watcher := lg.Watcher(cfg.Tick)
	c.gate = sinkgate.New(w, watcher, cp, down, &sinkgate.Options{MaxHeldBytes: 512 << 20, Logger: cfg.Logger, Log: lg})
	gctx, stopGate := context.WithCancel(ctx)
	var gateDone <-chan struct{}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cerr := c.gate.Close(cctx); cerr != nil && err == nil && ctx.Err() == nil {
			err = cerr
		}
		stopGate()
		if gateDone != nil {
			<-gateDone
		}
	}()
	m, err := waitMeta(ctx, lg, cfg.Tick, c.logger)
	if err != nil {
		return err
	}
	// The owned spans restart at the log's checkpoint, where the
	// downstream is known to hold everything (see replay).
	from := min(m.CheckpointTs, c.start)
	c.resolved = from
	if gateDone, err = startGate(gctx, c.gate, spans.owned(idx), from, 500*time.Millisecond, c.logger, c.id); err != nil {
		return err
	}
	if err := c.replay(ctx, lg, from); err != nil {
		return err
	}
	if uint64(lsn) < c.start {
		// The slot starts at the snapshot, which holds what it would send
		// below.
		lsn = pglogrepl.LSN(c.start)
	}

	// The global resolved ts, read in the background: the slot is
	// acknowledged up to it and no further.
	var global atomic.Uint64
	global.Store(c.start)
	hbConn, err := connect(ctx, cfg.PG)
	if err != nil {
		return err
	}
	defer hbConn.Close(context.Background())
	bg, stopBG := context.WithCancel(ctx)
	bgDone := make(chan struct{})
	go func() {
		defer close(bgDone)
		t := time.NewTicker(cfg.Tick)
		defer t.Stop()
		for {
			if m, err := lg.Meta(bg); err == nil {
				global.Store(max(global.Load(), m.ResolvedTs))
			}
			// A heartbeat in the WAL: when it is decoded, every commit
			// before it has been, so resolved ts moves on an idle upstream.
			if _, err := hbConn.Exec(bg, "SELECT pg_logical_emit_message(false, 'pgcdc', '')"); err != nil && bg.Err() == nil {
				c.logger.Warn("heartbeat failed", "err", err)
			}
			select {
			case <-bg.Done():
				return
			case <-t.C:
			}
		}
	}()
	defer func() { stopBG(); <-bgDone }()

	repl, err := replConnect(ctx, cfg.PG)
	if err != nil {
		return err
	}
	defer repl.Close(context.Background())
	err = pglogrepl.StartReplication(ctx, repl, slot, lsn, pglogrepl.StartReplicationOptions{PluginArgs: []string{
		"proto_version '1'", "publication_names '" + cfg.Publication + "'", "messages 'true'",
	}})
	if err != nil {
		return fmt.Errorf("start replication on slot %s: %w", slot, err)
	}
	nextStatus := time.Now()
	for {
		if time.Now().After(nextStatus) {
			ack := max(global.Load(), c.start)
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{
				WALWritePosition: pglogrepl.LSN(ack), WALFlushPosition: pglogrepl.LSN(ack), WALApplyPosition: pglogrepl.LSN(ack),
			}); err != nil {
				return fmt.Errorf("slot %s: acknowledge %s: %w", slot, pglogrepl.LSN(ack), err)
			}
			c.stats.Acked.Store(ack)
			nextStatus = time.Now().Add(cfg.Tick)
		}
		rctx, cancel := context.WithDeadline(ctx, nextStatus)
		raw, err := repl.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("slot %s: receive: %w", slot, err)
		}
		switch msg := raw.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("slot %s: %s", slot, msg.Message)
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return err
				}
				// The WAL end a keepalive reports is where decoding
				// stands: every commit below it has been sent. Inside a
				// transaction it may be past that transaction's commit,
				// which is not written yet: resolve only between them.
				if !c.inTxn && uint64(ka.ServerWALEnd) > 0 {
					if err := c.resolve(ctx, uint64(ka.ServerWALEnd)-1); err != nil {
						return err
					}
				}
				if ka.ReplyRequested {
					nextStatus = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return err
				}
				if err := c.handle(ctx, xld.WALData); err != nil {
					return err
				}
			}
		}
	}
}

// startGate adds spans to the gate g at from, and only then starts its
// release loop in the background, which retries a failed downstream every
// retry until ctx ends; the channel returned is closed once the loop has
// stopped.
//
// The order is what keeps the checkpoint behind the downstream. A gate with
// no spans reports the global resolved ts G as its applied ts, and the
// checkpoint file it reports to is its writer's: a restarted capture's loop
// run before its spans were in would overwrite the dead process's applied ts
// with G, and the coordinator (the checkpoint never moves back) could fold it
// before AddSpan lowered it. While the downstream is down nothing corrects
// it, and the recovery, which replays (checkpoint, resolved], would skip what
// the dead process logged but never got downstream.
func startGate(ctx context.Context, g *sinkgate.Gate, spans []meta.SpanID, from uint64, retry time.Duration, logger *slog.Logger, id string) (<-chan struct{}, error) {
	for _, s := range spans {
		if err := g.AddSpan(ctx, s, from); err != nil {
			return nil, err
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			err := g.Run(ctx)
			if err == nil || ctx.Err() != nil || errors.Is(err, sinkgate.ErrClosed) {
				return
			}
			// The batch stays held; the log keeps growing meanwhile.
			logger.Warn("downstream failed; retrying", "writer", id, "err", apply.Redact(err.Error()))
			select {
			case <-ctx.Done():
				return
			case <-time.After(retry):
			}
		}
	}()
	return done, nil
}

// waitMeta reads the log's meta object, waiting while there is none yet: the
// coordinator creates it, and a capture may start first (-role all runs them
// at once, and so may a deployment's processes).
func waitMeta(ctx context.Context, lg *redokit.Log, tick time.Duration, logger *slog.Logger) (*meta.Meta, error) {
	warned := false
	for {
		m, err := lg.Meta(ctx)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, redokit.ErrNoLog) {
			return nil, fmt.Errorf("read the log's meta object: %w", err)
		}
		if !warned {
			logger.Info("waiting for the coordinator to create the log", "log", lg.ID(), "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read the log's meta object: %w", err)
		case <-time.After(tick):
		}
	}
}

// replay hands the gate what the log holds of the owned spans above from
// (the log's checkpoint, where startGate added them: the downstream is known
// to hold everything there), up to the slot's confirmed LSN: the slot sends
// nothing below that again, and a dead predecessor's downstream may have
// applied less than it logged (the downstream may have been down). The
// events go to the log again too, as copies the reader drops.
func (c *capturer) replay(ctx context.Context, lg *redokit.Log, from uint64) error {
	if from >= c.start {
		return nil
	}
	// What the slot confirmed is in the log: the global resolved ts is at
	// or above it, or soon will be after an initial snapshot (until the
	// coordinator's next tick).
	for {
		m, err := lg.Meta(ctx)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if m.ResolvedTs >= c.start {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.cfg.Tick):
		}
	}
	r, from, err := openReplay(ctx, lg, from, c.start)
	if err != nil {
		return fmt.Errorf("replay (%d, %d] from the log: %w", from, c.start, err)
	}
	if r == nil {
		c.logger.Info("nothing to replay from the log: the checkpoint passed it", "writer", c.id, "to", c.start)
		return c.resolve(ctx, c.start)
	}
	defer r.Close()
	var n int64
	for ev, err := range r.CodecEvents(ctx) {
		if err != nil {
			return fmt.Errorf("replay (%d, %d] from the log: %w", from, c.start, err)
		}
		span, err := c.spanOfEvent(ev)
		if err != nil {
			return fmt.Errorf("replay from the log: %w", err)
		}
		if !c.own[span] {
			continue
		}
		if ts := ev.CommitTs(); ts > c.resolved+1 {
			// Everything below this commit ts has been handed over.
			if err := c.resolve(ctx, ts-1); err != nil {
				return err
			}
		}
		if err := c.gate.Write(ctx, span, *ev.Clone()); err != nil {
			return err
		}
		n++
	}
	c.logger.Info("replayed from the log", "writer", c.id, "from", from, "to", c.start, "events", n)
	return c.resolve(ctx, c.start)
}

// openReplay opens a reader of (from, end]. The coordinator may move the
// checkpoint above from after the capture read it (it folds what every
// capture's downstream applied, a restarted one's predecessor included):
// every downstream then holds the events up to the new checkpoint, so the
// replay starts there, and GC may already have deleted what is below it.
// It returns the start used, and a nil reader when the checkpoint reached
// end.
func openReplay(ctx context.Context, lg *redokit.Log, from, end uint64) (*reader.Reader, uint64, error) {
	for {
		r, err := lg.OpenReader(ctx, &redokit.ReadOptions{Start: from, End: end})
		if !errors.Is(err, redokit.ErrBelowCheckpoint) {
			return r, from, err
		}
		m, merr := lg.Meta(ctx)
		if merr != nil {
			return nil, from, errors.Join(err, merr)
		}
		if m.CheckpointTs <= from {
			return nil, from, err // not a checkpoint that moved: say so
		}
		if from = m.CheckpointTs; from >= end {
			return nil, from, nil
		}
	}
}

// spanOfEvent finds the span of an event read from the log.
func (c *capturer) spanOfEvent(ev *codec.Event) (meta.SpanID, error) {
	tn := ev.TableName()
	ts := c.spans.tables[tn.Name]
	if ts == nil {
		return 0, fmt.Errorf("table %s of the log is not in -tables", tn.Name)
	}
	if ev.IsDDL() || ts.keyCol == "" {
		return ts.first, nil
	}
	img := ev.Row.Columns
	if len(img) == 0 { // a delete
		img = ev.Row.PreColumns
	}
	for _, col := range img {
		if col.Name == ts.keyCol {
			if col.Value.Kind() != codec.KindInt {
				return 0, fmt.Errorf("table %s: split key %s is %v, not an integer", tn.Name, ts.keyCol, col.Value)
			}
			return ts.span(col.Value.Int()), nil
		}
	}
	return 0, fmt.Errorf("table %s: a row without its split key %s", tn.Name, ts.keyCol)
}

// resolve tells the gate that the owned spans have nothing more at or below
// ts.
func (c *capturer) resolve(ctx context.Context, ts uint64) error {
	if ts <= c.resolved {
		return nil
	}
	c.resolved = ts
	for s := range c.own {
		if err := c.gate.AdvanceResolved(s, ts); err != nil {
			return err
		}
	}
	c.stats.Resolved.Store(ts)
	return nil
}

func (c *capturer) handle(ctx context.Context, data []byte) error {
	m, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("pgoutput message: %w", err)
	}
	if c.inTxn && c.commitLSN <= c.start {
		switch m.(type) {
		case *pglogrepl.InsertMessage, *pglogrepl.UpdateMessage, *pglogrepl.DeleteMessage, *pglogrepl.TruncateMessage:
			// In the log before this capture restarted, or in the initial
			// snapshot: commit drops the transaction.
			return nil
		}
	}
	switch m := m.(type) {
	case *pglogrepl.RelationMessage:
		return c.relation(ctx, m)
	case *pglogrepl.BeginMessage:
		c.inTxn, c.commitLSN = true, uint64(m.FinalLSN)
		c.txnRows, c.txnDDLs, c.nRows = map[meta.SpanID][]codec.Event{}, nil, 0
	case *pglogrepl.InsertMessage:
		rel, err := c.rel(m.RelationID)
		if err != nil {
			return err
		}
		if rel.schema == "public" && rel.name == ddlTable {
			return c.ddlRecord(rel, m.Tuple)
		}
		post, err := c.image(rel, m.Tuple, nil)
		if err != nil {
			return err
		}
		return c.add(rel, nil, post)
	case *pglogrepl.UpdateMessage:
		rel, err := c.rel(m.RelationID)
		if err != nil {
			return err
		}
		if m.OldTupleType != pglogrepl.UpdateMessageTupleTypeOld {
			return fmt.Errorf("table %s.%s: an update without its old row: set REPLICA IDENTITY FULL on it", rel.schema, rel.name)
		}
		pre, err := c.image(rel, m.OldTuple, nil)
		if err != nil {
			return err
		}
		post, err := c.image(rel, m.NewTuple, pre)
		if err != nil {
			return err
		}
		return c.add(rel, pre, post)
	case *pglogrepl.DeleteMessage:
		rel, err := c.rel(m.RelationID)
		if err != nil {
			return err
		}
		if m.OldTupleType != pglogrepl.DeleteMessageTupleTypeOld {
			return fmt.Errorf("table %s.%s: a delete without its old row: set REPLICA IDENTITY FULL on it", rel.schema, rel.name)
		}
		pre, err := c.image(rel, m.OldTuple, nil)
		if err != nil {
			return err
		}
		return c.add(rel, pre, nil)
	case *pglogrepl.TruncateMessage:
		if c.skipDDL[c.commitLSN] {
			c.logger.Warn("TRUNCATE left out of the log (-skip-ddl)", "writer", c.id, "lsn", pglogrepl.LSN(c.commitLSN).String())
			return nil
		}
		return &DDLError{LSN: c.commitLSN, Query: "TRUNCATE", Reason: errors.New("a TRUNCATE: the log has no row images for it; the capture does not carry TRUNCATE")}
	case *pglogrepl.CommitMessage:
		return c.commit(ctx, uint64(m.CommitLSN))
	case *pglogrepl.LogicalDecodingMessage:
		// A heartbeat: decoded after every commit below it.
		if !m.Transactional && !c.inTxn && m.LSN > 0 {
			return c.resolve(ctx, uint64(m.LSN)-1)
		}
	}
	return nil
}

func (c *capturer) rel(oid uint32) (*relation, error) {
	r, ok := c.rels[oid]
	if !ok {
		return nil, fmt.Errorf("a row of relation OID %d before its relation message", oid)
	}
	return r, nil
}

func (c *capturer) relation(ctx context.Context, m *pglogrepl.RelationMessage) error {
	r := &relation{oid: m.RelationID, schema: m.Namespace, name: m.RelationName, keyIdx: -1}
	if r.schema == "public" && r.name == ddlTable {
		for _, col := range m.Columns {
			r.cols = append(r.cols, relCol{name: col.Name})
		}
		c.rels[r.oid] = r
		return nil
	}
	pk, ok := c.pks[r.oid]
	if !ok {
		// A table the DDL records did not create: its key from the catalog.
		var err error
		if pk, err = primaryKey(ctx, c.cat, m.RelationID); err != nil {
			return fmt.Errorf("table %s.%s: read its primary key: %w", r.schema, r.name, err)
		}
		var exists bool
		if err := c.cat.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_class WHERE oid = $1)", m.RelationID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			// Dropped since, by a DDL the records did not carry: its
			// key cannot be known, and a guess could delete wrong rows.
			return fmt.Errorf("table %s.%s (OID %d): its primary key is unknown (dropped before the capture read it, and not created by a recorded DDL)", r.schema, r.name, r.oid)
		}
		c.pks[r.oid] = pk
	}
	r.spans = c.spans.tables[r.name]
	for i, col := range m.Columns {
		ct, err := mapColumn(r.schema+"."+r.name, col.Name, col.DataType, col.TypeModifier)
		rc := relCol{name: col.Name, ct: ct, err: err, pk: slices.Contains(pk, col.Name)}
		r.cols = append(r.cols, rc)
		if r.spans != nil && r.spans.keyCol == col.Name {
			if ct.typ != codec.TypeShort && ct.typ != codec.TypeLong && ct.typ != codec.TypeLonglong {
				return fmt.Errorf("table %s: split key column %s is not an integer", r.name, col.Name)
			}
			r.keyIdx = i
		}
	}
	if r.spans != nil && r.spans.keyCol != "" && r.keyIdx < 0 {
		return fmt.Errorf("table %s: split key column %s is not one of its columns", r.name, r.spans.keyCol)
	}
	c.rels[r.oid] = r
	return nil
}

// image converts a pgoutput tuple into a complete row image. old supplies
// the unchanged TOASTed values pgoutput leaves out of a new row.
func (c *capturer) image(r *relation, td *pglogrepl.TupleData, old []codec.Column) ([]codec.Column, error) {
	if td == nil || len(td.Columns) != len(r.cols) {
		return nil, fmt.Errorf("table %s.%s: a row of %d columns, the relation has %d", r.schema, r.name, len(td.Columns), len(r.cols))
	}
	tname := r.schema + "." + r.name
	out := make([]codec.Column, len(r.cols))
	for i, rc := range r.cols {
		if rc.err != nil {
			return nil, rc.err
		}
		var v codec.Value
		d := td.Columns[i]
		switch d.DataType {
		case pglogrepl.TupleDataTypeNull:
			v = codec.Null()
		case pglogrepl.TupleDataTypeToast:
			if old == nil {
				return nil, fmt.Errorf("table %s column %s: an unchanged TOASTed value without the old row", tname, rc.name)
			}
			v = old[i].Value
		case pglogrepl.TupleDataTypeText:
			var err error
			if v, err = rc.ct.toValue(tname, rc.name, d.Data); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("table %s column %s: tuple data kind %q is not text", tname, rc.name, d.DataType)
		}
		out[i] = logColumn(rc, v)
	}
	return out, nil
}

// logColumn is one column of a row image in the log.
func logColumn(rc relCol, v codec.Value) codec.Column {
	col := codec.Column{Name: rc.name, Type: rc.ct.typ, Flags: rc.ct.flags, Charset: rc.ct.cs, Collation: rc.ct.coll, Value: v}
	if rc.pk {
		col.Flags |= codec.FlagPrimaryKey | codec.FlagHandleKey
	} else {
		col.Flags |= codec.FlagNullable
	}
	return col
}

func (c *capturer) spanOf(r *relation, img []codec.Column) (meta.SpanID, error) {
	if r.spans == nil {
		return 0, fmt.Errorf("table %s.%s is not in -tables: the capture maps each table it carries to its spans", r.schema, r.name)
	}
	if r.keyIdx < 0 {
		return r.spans.first, nil
	}
	v := img[r.keyIdx].Value
	if v.Kind() != codec.KindInt {
		return 0, fmt.Errorf("table %s: split key %s is %v, not an integer", r.name, r.spans.keyCol, v)
	}
	return r.spans.span(v.Int()), nil
}

// add buffers one row change of the open transaction. An update that moves
// a row to another span of a split table is a delete in the old one and an
// insert in the new: each span's owner writes its half.
func (c *capturer) add(r *relation, pre, post []codec.Column) error {
	tn := codec.TableName{Schema: r.schema, Name: r.name, PhysicalID: int64(r.oid)}
	mk := func(pre, post []codec.Column) codec.Event {
		return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{Table: tn, PreColumns: pre, Columns: post}}
	}
	var sp, sq meta.SpanID
	var err error
	if pre != nil {
		if sp, err = c.spanOf(r, pre); err != nil {
			return err
		}
	}
	if post != nil {
		if sq, err = c.spanOf(r, post); err != nil {
			return err
		}
	}
	c.nRows++
	switch {
	case pre != nil && post != nil && sp != sq:
		c.txnRows[sp] = append(c.txnRows[sp], mk(pre, nil))
		c.txnRows[sq] = append(c.txnRows[sq], mk(nil, post))
	case pre != nil:
		c.txnRows[sp] = append(c.txnRows[sp], mk(pre, post))
	default:
		c.txnRows[sq] = append(c.txnRows[sq], mk(nil, post))
	}
	return nil
}

// parseSkipDDL reads -skip-ddl: commit LSNs as PostgreSQL writes them
// (16/B374D848), comma-separated.
func parseSkipDDL(spec string) (map[uint64]bool, error) {
	out := map[uint64]bool{}
	for _, f := range strings.Split(spec, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		lsn, err := pglogrepl.ParseLSN(f)
		if err != nil {
			return nil, fmt.Errorf("-skip-ddl: %q is not an LSN (as the error that named it wrote it, e.g. 0/1A2B3C8): %w", f, err)
		}
		out[uint64(lsn)] = true
	}
	return out, nil
}

// ErrUntranslatedDDL is what a DDL the capture cannot carry stops it with
// (a *DDLError): the capture would stop at the same LSN on every restart,
// until the operator names it with -skip-ddl.
var ErrUntranslatedDDL = errors.New("a DDL the capture does not translate")

// DDLError is a DDL the capture cannot carry: the transaction it committed
// in, its text, and why.
type DDLError struct {
	LSN    uint64 // the commit LSN of its transaction (the log's commit ts)
	Query  string // the statement, as the trigger recorded it
	Reason error
}

func (e *DDLError) Error() string {
	lsn := pglogrepl.LSN(e.LSN).String()
	return fmt.Sprintf("%v (in the transaction committed at LSN %s); it stops the capture here on every restart: "+
		"to go on, apply its change downstream yourself if it needs one, and run the capture with -skip-ddl %s, which leaves the DDLs of that transaction it cannot translate out of the log",
		e.Reason, lsn, lsn)
}

func (e *DDLError) Is(target error) bool { return target == ErrUntranslatedDDL }

func (e *DDLError) Unwrap() error { return e.Reason }

// ddlRecord turns a row of the DDL table into the log's DDL event; one it
// cannot translate is a *DDLError, or skipped if -skip-ddl names its
// transaction.
func (c *capturer) ddlRecord(r *relation, td *pglogrepl.TupleData) error {
	if c.commitLSN <= c.start {
		return nil // in the log before this capture restarted (or in the initial snapshot)
	}
	f := map[string]string{}
	for i, rc := range r.cols {
		if i < len(td.Columns) && td.Columns[i].DataType == pglogrepl.TupleDataTypeText {
			f[rc.name] = string(td.Columns[i].Data)
		}
	}
	err := c.ddlEvent(f)
	if err == nil {
		return nil
	}
	if c.skipDDL[c.commitLSN] {
		c.logger.Warn("DDL left out of the log (-skip-ddl)", "writer", c.id, "lsn", pglogrepl.LSN(c.commitLSN).String(), "err", err)
		return nil
	}
	return &DDLError{LSN: c.commitLSN, Query: f["query"], Reason: err}
}

// statement picks, from the text a DDL record holds, the statement the
// record is for: the whole text when it is one statement; else the seq-th
// (the trigger counts the DDLs of each tag in one client message) statement
// whose tag is the record's.
func statement(f map[string]string) (string, error) {
	tag, query := f["tag"], f["query"]
	stmts, err := splitStatements(query)
	if err != nil {
		return "", fmt.Errorf("DDL %s %q: %w", tag, trunc(query), err)
	}
	if len(stmts) == 1 {
		return stmts[0], nil
	}
	seq, err := strconv.Atoi(f["seq"])
	if err != nil || seq < 1 {
		return "", fmt.Errorf("DDL %s %q: %d statements in one query, and the trigger recorded no position (seq %q; a pgcdc_ddl table of an older setup: run the setup again)", tag, trunc(query), len(stmts), f["seq"])
	}
	n := 0
	for _, s := range stmts {
		if stmtTag(s) == tag {
			if n++; n == seq {
				return s, nil
			}
		}
	}
	return "", fmt.Errorf("DDL %s %q: the trigger recorded %s number %d of the query, which holds %d", tag, trunc(query), tag, seq, n)
}

// ddlEvent adds the DDL event a record of the DDL table (its fields f)
// stands for to the transaction.
func (c *capturer) ddlEvent(f map[string]string) error {
	tag := f["tag"]
	want := map[string]string{"CREATE TABLE": "create", "ALTER TABLE": "alter", "DROP TABLE": "drop"}[tag]
	if want == "" {
		return fmt.Errorf("DDL %s %q: the capture carries CREATE TABLE, ALTER TABLE … ADD COLUMN and DROP TABLE only", tag, trunc(f["query"]))
	}
	query, err := statement(f)
	if err != nil {
		return err
	}
	text, kind, table, err := translateDDL(query)
	if err != nil {
		return err
	}
	if kind != want {
		return fmt.Errorf("DDL %s %q: its text is not the statement its tag says", tag, trunc(query))
	}
	oid, err := strconv.ParseInt(f["objid"], 10, 64)
	if err != nil || f["table_name"] == "" {
		return fmt.Errorf("DDL %q: the trigger recorded no table (objid %q)", trunc(query), f["objid"])
	}
	if table != f["table_name"] {
		return fmt.Errorf("DDL %q names table %s, the trigger recorded %s", trunc(query), table, f["table_name"])
	}
	tn := codec.TableName{Schema: f["schema_name"], Name: f["table_name"], PhysicalID: oid}
	ts := c.spans.tables[tn.Name]
	if ts == nil {
		return fmt.Errorf("DDL %q: table %s is not in -tables", trunc(query), tn.Name)
	}
	if ts.count() > 1 && kind != "create" {
		// Its spans belong to several writers, whose gates release on
		// their own: the rows of one written before the DDL could reach
		// the downstream after it, which would need a barrier across
		// the gates. A CREATE TABLE precedes every row of the table: a
		// gate that releases one first fails and retries until the
		// table is there.
		return fmt.Errorf("DDL %q: table %s is split into %d spans; only CREATE TABLE is carried on a split table", trunc(query), tn.Name, ts.count())
	}
	d := codec.DDL{Table: tn, Query: text}
	switch kind {
	case "create":
		d.Type, d.Tables = codec.ActionCreateTable, []codec.DDLTable{{TableName: tn, Role: codec.RoleCreated}}
		if f["pk"] != "" {
			c.pks[uint32(oid)] = strings.Split(f["pk"], ",")
		} else {
			c.pks[uint32(oid)] = nil
		}
	case "alter":
		d.Type, d.Tables = codec.ActionAddColumn, []codec.DDLTable{{TableName: tn, Role: codec.RoleAffected}}
	case "drop":
		d.Type, d.Tables = codec.ActionDropTable, []codec.DDLTable{{TableName: tn, Role: codec.RoleDropped}}
	}
	c.txnDDLs = append(c.txnDDLs, spanEvents{span: ts.first, evs: []codec.Event{{Kind: codec.DDLEvent, DDL: d}}})
	return nil
}

// commit writes the transaction's events of the owned spans at the commit
// ts its commit LSN gives, then resolves the owned spans there.
func (c *capturer) commit(ctx context.Context, lsn uint64) error {
	c.inTxn = false
	c.stats.Txns.Add(1)
	if lsn != c.commitLSN {
		return fmt.Errorf("commit LSN %s differs from the one its BEGIN announced (%s)", pglogrepl.LSN(lsn), pglogrepl.LSN(c.commitLSN))
	}
	if lsn <= c.start {
		return nil // in the log before this capture restarted
	}
	if len(c.txnDDLs) > 0 && c.nRows > 0 {
		// At one commit ts the log puts rows before DDLs: a CREATE TABLE
		// and its first rows in one transaction would come out reversed.
		return fmt.Errorf("the transaction committed at LSN %s holds DDL and %d row changes: run DDL in transactions of its own", pglogrepl.LSN(lsn), c.nRows)
	}
	ts := commitTs(lsn)
	stamp := func(evs []codec.Event) {
		for i := range evs {
			if evs[i].Kind == codec.DDLEvent {
				evs[i].DDL.StartTs, evs[i].DDL.CommitTs = ts-1, ts
			} else {
				evs[i].Row.StartTs, evs[i].Row.CommitTs = ts-1, ts
			}
		}
	}
	for _, s := range slices.Sorted(maps.Keys(c.txnRows)) {
		if !c.own[s] {
			continue
		}
		evs := c.txnRows[s]
		stamp(evs)
		if err := c.gate.Write(ctx, s, evs...); err != nil {
			return err
		}
		c.stats.Events.Add(int64(len(evs)))
	}
	for _, d := range c.txnDDLs {
		if !c.own[d.span] {
			continue
		}
		stamp(d.evs)
		if err := c.gate.Write(ctx, d.span, d.evs...); err != nil {
			return err
		}
		c.stats.Events.Add(1)
	}
	return c.resolve(ctx, ts)
}

// commitTs is the log's commit ts of a transaction: its commit record's LSN.
// LSNs are 64-bit positions in the WAL, strictly increasing in commit order
// (pgoutput sends transactions in that order), one per transaction: a
// monotone, unique stamp like a TSO's, with no clock in it.
func commitTs(lsn uint64) uint64 { return lsn }

// lazySink opens the downstream at its first batch and again after a
// failure, so that a capture starts, and keeps logging, while its downstream
// is down: the gate holds what it cannot release.
type lazySink struct {
	uri  string
	opts *apply.SinkOptions
	sink apply.Sink
	down sinkgate.Downstream
}

func (l *lazySink) Apply(ctx context.Context, evs []codec.Event) error {
	if l.down == nil {
		s, err := apply.Open(ctx, l.uri, l.opts)
		if err != nil {
			return err
		}
		l.sink, l.down = s, sinkgate.ApplyTo(s, nil)
	}
	if err := l.down.Apply(ctx, evs); err != nil {
		l.Close()
		return err
	}
	return nil
}

func (l *lazySink) Close() {
	if l.sink != nil {
		l.sink.Close()
		l.sink, l.down = nil, nil
	}
}

// fileCheckpoint reports a gate's applied ts in a file of the state
// directory, for the coordinator (in this process or another) to fold.
func fileCheckpoint(dir string, idx int) sinkgate.Checkpointer {
	path := filepath.Join(dir, "checkpoint-"+writerID(idx))
	return sinkgate.CheckpointFunc(func(ctx context.Context, ts uint64) error {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(strconv.FormatUint(ts, 10)), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	})
}
