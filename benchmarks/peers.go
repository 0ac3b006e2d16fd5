package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"
	tidwal "github.com/tidwall/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/benchkit"
	"github.com/redokit/redokit/writer"
)

// The WAL libraries compared on one local workload: the same encoded events
// (one record each), appended in batches of SyncEvery records with one
// durable sync per batch, to a fresh directory on the same file system.
var peerNames = []string{"raw-append", "redokit-lz4", "redokit-none", "etcd-wal", "prometheus-wlog", "tidwall-wal"}

var peerDesc = map[string]string{
	"raw-append":      "os.File append of the same bytes, fdatasync per batch (the floor)",
	"redokit-lz4":     "redokit writer, local backend: sort by resolved ts, lz4 + CRC32C blocks, fdatasync, progress publication (a conditional put: tmp file, fsync, rename, dir fsync) per flush",
	"redokit-none":    "the same with compression off",
	"etcd-wal":        "go.etcd.io/etcd/server/v3/storage/wal: Save(HardState, entries) per batch (fdatasync), 64 MB preallocated segments, chained CRC32C",
	"prometheus-wlog": "github.com/prometheus/prometheus/tsdb/wlog: Log(records...) then Sync() per batch (fsync), 32 KiB pages, CRC32C per fragment, no compression",
	"tidwall-wal":     "github.com/tidwall/wal: WriteBatch per batch (fsync), binary format",
}

// peerLog is one library under test.
type peerLog interface {
	// batch appends records (and their events, for the redokit writer) and
	// makes them durable.
	batch(ctx context.Context, recs [][]byte, evs []codec.Event, ts uint64) error
	close(ctx context.Context) error
}

func runPeerCell(ctx context.Context, in childInput, res *Result) error {
	c := in.Cell
	dir, err := os.MkdirTemp(in.Dir, "redokit-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The same events for every library: encoded once, kept with their
	// events for the redokit writer (which encodes them itself).
	g := benchkit.NewGen(1, c.RowSize, "rows")
	recs := make([][]byte, 0, c.Records)
	evs := make([]codec.Event, 0, c.Records)
	tss := make([]uint64, 0, c.Records)
	var payload int64
	for ts := benchkit.TsBase + 1; len(recs) < c.Records; ts++ {
		span := int(ts % benchkit.Spans)
		for _, ev := range g.Next(span, ts) {
			e := ev.Clone()
			b := codec.AppendEvent(nil, e)
			recs = append(recs, b)
			evs = append(evs, *e)
			tss = append(tss, ts)
			payload += int64(len(b))
		}
	}
	recs, evs, tss = recs[:c.Records], evs[:c.Records], tss[:c.Records]

	var p peerLog
	switch c.Peer {
	case "raw-append":
		p, err = openRawPeer(dir)
	case "redokit-lz4", "redokit-none":
		p, err = openRedokitPeer(ctx, dir, c.Peer == "redokit-lz4")
	case "etcd-wal":
		p, err = openEtcdPeer(dir)
	case "prometheus-wlog":
		p, err = openWlogPeer(dir)
	case "tidwall-wal":
		p, err = openTidwallPeer(dir)
	default:
		err = fmt.Errorf("unknown peer %q", c.Peer)
	}
	if err != nil {
		return err
	}
	var lat []float64
	t0 := time.Now()
	for i := 0; i < len(recs); i += c.SyncEvery {
		j := min(i+c.SyncEvery, len(recs))
		t1 := time.Now()
		// The batch's resolved ts: its last ts, unless the next batch goes on
		// at that ts (a transaction cut in two).
		resolved := tss[j-1]
		if j < len(tss) && tss[j] == resolved {
			resolved--
		}
		if err := p.batch(ctx, recs[i:j], evs[i:j], resolved); err != nil {
			p.close(ctx)
			return fmt.Errorf("%s: %w", c.Peer, err)
		}
		lat = append(lat, float64(time.Since(t1))/float64(time.Millisecond))
	}
	el := time.Since(t0)
	if err := p.close(ctx); err != nil {
		return fmt.Errorf("%s close: %w", c.Peer, err)
	}
	m := res.Metrics
	m["rows_s"] = float64(len(recs)) / el.Seconds()
	m["mib_s"] = float64(payload) / mib / el.Seconds()
	m["batch_p50_ms"], m["batch_p99_ms"], m["batch_max_ms"] = benchkit.Percentiles(lat)
	m["disk_mib"] = float64(dirSize(dir)) / mib
	m["payload_mib"] = float64(payload) / mib
	m["rss_mib"] = float64(peakRSS()) / mib
	return nil
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

type rawPeer struct{ f *os.File }

func openRawPeer(dir string) (peerLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	return &rawPeer{f}, err
}

func (p *rawPeer) batch(_ context.Context, recs [][]byte, _ []codec.Event, _ uint64) error {
	// One write per batch, as a buffered appender would do.
	var n int
	for _, r := range recs {
		n += len(r)
	}
	buf := make([]byte, 0, n)
	for _, r := range recs {
		buf = append(buf, r...)
	}
	if _, err := p.f.Write(buf); err != nil {
		return err
	}
	return fdatasync(p.f)
}
func (p *rawPeer) close(context.Context) error { return p.f.Close() }

type redokitPeer struct {
	w    *writer.Writer
	done func(context.Context) error
}

func (p *redokitPeer) close(ctx context.Context) error { return p.done(ctx) }

func openRedokitPeer(ctx context.Context, dir string, lz bool) (peerLog, error) {
	b, err := local.New(dir, nil)
	if err != nil {
		return nil, err
	}
	comp := writer.CompressionNone
	if lz {
		comp = writer.CompressionLZ4
	}
	w, err := writer.Open(ctx, b, &writer.Options{LogID: "peer", WriterID: "w0", FlushInterval: time.Hour, Compression: comp})
	if err != nil {
		b.Close()
		return nil, err
	}
	for s := range benchkit.Spans {
		if err := w.AddSpan(writer.SpanID(s), benchkit.TsBase); err != nil {
			return nil, err
		}
	}
	return &redokitPeer{w: w, done: func(ctx context.Context) error {
		return errors.Join(w.Close(ctx), b.Close())
	}}, nil
}

func (p *redokitPeer) batch(ctx context.Context, _ [][]byte, evs []codec.Event, ts uint64) error {
	// Events of one commit ts and span are consecutive: write them in runs.
	for i := 0; i < len(evs); {
		j := i + 1
		for j < len(evs) && evs[j].CommitTs() == evs[i].CommitTs() {
			j++
		}
		span := writer.SpanID(evs[i].Row.Table.PhysicalID - 100)
		if err := p.w.Write(ctx, span, evs[i:j]...); err != nil {
			return err
		}
		i = j
	}
	for s := range benchkit.Spans {
		if err := p.w.AdvanceResolved(writer.SpanID(s), ts); err != nil {
			return err
		}
	}
	_, err := p.w.Flush(ctx)
	return err
}

type etcdPeer struct {
	w   *etcdwal.WAL
	idx uint64
}

func openEtcdPeer(dir string) (peerLog, error) {
	w, err := etcdwal.Create(zap.NewNop(), filepath.Join(dir, "etcd"), nil)
	return &etcdPeer{w: w}, err
}

func (p *etcdPeer) batch(_ context.Context, recs [][]byte, _ []codec.Event, _ uint64) error {
	ents := make([]raftpb.Entry, len(recs))
	for i, r := range recs {
		p.idx++
		ents[i] = raftpb.Entry{Term: 1, Index: p.idx, Type: raftpb.EntryNormal, Data: r}
	}
	return p.w.Save(raftpb.HardState{Term: 1, Commit: p.idx}, ents)
}
func (p *etcdPeer) close(context.Context) error { return p.w.Close() }

type wlogPeer struct{ w *wlog.WL }

func openWlogPeer(dir string) (peerLog, error) {
	w, err := wlog.NewSize(slog.New(slog.DiscardHandler), nil, filepath.Join(dir, "wlog"), wlog.DefaultSegmentSize, compression.None)
	return &wlogPeer{w}, err
}

func (p *wlogPeer) batch(_ context.Context, recs [][]byte, _ []codec.Event, _ uint64) error {
	if err := p.w.Log(recs...); err != nil {
		return err
	}
	return p.w.Sync()
}
func (p *wlogPeer) close(context.Context) error { return p.w.Close() }

type tidwallPeer struct {
	l   *tidwal.Log
	idx uint64
	b   tidwal.Batch
}

func openTidwallPeer(dir string) (peerLog, error) {
	l, err := tidwal.Open(filepath.Join(dir, "tidwall"), &tidwal.Options{NoSync: false, SegmentSize: 20 << 20, LogFormat: tidwal.Binary})
	return &tidwallPeer{l: l}, err
}

func (p *tidwallPeer) batch(_ context.Context, recs [][]byte, _ []codec.Event, _ uint64) error {
	p.b.Clear()
	for _, r := range recs {
		p.idx++
		p.b.Write(p.idx, r)
	}
	return p.l.WriteBatch(&p.b)
}
func (p *tidwallPeer) close(context.Context) error { return p.l.Close() }
