package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/pierrec/lz4/v4"
	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"
	tidwal "github.com/tidwall/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/benchmarks/internal/msgpbench"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/bench"
	"github.com/redokit/redokit/writer"
)

// The logs compared on the same local workloads (peer cells): the same
// records, handed over one transaction (TxnRows records) at a time, made
// durable on the same cadence, each cell in a fresh directory on the same
// file system.

// peerNames are the logs of the one-column workloads; peerNames10 those of
// the ten-column variant, where redokit meets the model of TiCDC's writer.
var (
	peerNames   = []string{"raw-append", "redokit-none", "redokit-lz4", "prometheus-wlog", "pebble-record", "etcd-wal", "tidwall-wal"}
	peerNames10 = []string{"raw-append", "redokit-none", "redokit-lz4", "ticdc-none", "ticdc-lz4"}
)

var peerDesc = map[string]string{
	"raw-append":      "os.File: one write(2) of the transaction's bytes (contiguous in memory, no copy) per transaction; fdatasync at each sync point; one file (the floor)",
	"redokit-none":    "redokit writer, local backend, lz4 off: WriteEncoded (1 column: the same bytes, decoded and checked by the writer) or Write (10 columns: the rows, encoded by the writer) per transaction; at each sync point AdvanceResolved of its 8 spans then Flush (sort by commit ts, CRC32C blocks and a progress frame, one fdatasync; between sync points every 16 MiB written is staged: cut, compressed and appended without a sync; the writer state object is published lazily, at most every 200 ms, off the flush path); close publishes; 64 MiB segments",
	"redokit-lz4":     "the same with lz4 on (256 KiB blocks compressed by GOMAXPROCS workers)",
	"prometheus-wlog": "github.com/prometheus/prometheus/tsdb/wlog: Log(records...) per transaction, Sync() (fsync) at each sync point; 32 KiB pages, CRC32C per fragment, 128 MiB segments, no compression",
	"pebble-record":   "github.com/cockroachdb/pebble/v2/record: WriteRecord per record into a record.Writer over a 256 KiB bufio.Writer over an os.File (record.Writer writes each record through to its io.Writer; pebble's own LogWriter buffers likewise); Flush + fdatasync at each sync point; 32 KiB blocks, CRC32C per chunk; one file",
	"etcd-wal":        "go.etcd.io/etcd/server/v3/storage/wal: the entries since the last sync point in one Save(HardState, entries) at each sync point (Save fdatasyncs whenever it has entries, so it is called once per sync point); 64 MB preallocated segments, chained CRC32C",
	"tidwall-wal":     "github.com/tidwall/wal: the entries since the last sync point in one WriteBatch at each sync point (fsync); binary format, 20 MiB segments",
	"ticdc-none":      "a model of TiCDC's file redo writer (benchmarks/peers.go, from shared/reference/ticdc-redo.md): each row msgp-encoded as TiCDC's RedoLog (0xff 0xff + version + msgpack), framed with its 8-byte length word and zero padding to 8 bytes, no checksum, through a 128 KiB buffer (TiCDC's PageWriter) into a .log.tmp file; at each sync point flush + fdatasync; at 64 MiB of uncompressed frames (and at close) fdatasync, rename to {capture}_{cf}_row_{maxCommitTs}_{n}.log, dir fsync",
	"ticdc-lz4":       "the same with one lz4 frame per file (pierrec/lz4/v4 Writer, default options: 4 MiB blocks, content checksum, one goroutine) between the framing and the buffer; a sync point Flushes the lz4 Writer (compresses the pending block), a rotation Closes the frame",
}

// Workloads: records are TxnRows-record transactions (one commit ts, one
// span each, the spans in turn), synced every SyncEvery records (a multiple
// of TxnRows) or, with SyncBytes, at the first transaction boundary at or
// past each SyncBytes of payload; the last transaction is always synced.
const (
	peerTxnRows   = 1000
	peerRowSize   = 512
	peerSpans     = 8
	peerSyncBytes = 64 << 20
)

// peerLog is one log under test.
type peerLog interface {
	// append hands one transaction to the log; it need not be durable yet.
	append(ctx context.Context, t *peerTxn) error
	// sync makes everything appended durable; ts is the resolved ts (every
	// transaction so far has a commit ts at or below it).
	sync(ctx context.Context, ts uint64) error
	close(ctx context.Context) error
	// received is the payload bytes the log took (redokit: the durable
	// payload its Stats report; the others: the bytes handed to them).
	received() int64
}

// peerTxn is one transaction: its records as encoded bytes (one-column
// workloads, and the raw append of the ten-column one), or its rows.
type peerTxn struct {
	span  int
	ts    uint64
	recs  [][]byte
	bytes []byte // recs, contiguous
	// evs is the rows, as runs of the row pool stamped in place (two
	// where the transaction wraps around the pool): handing the log a copy
	// of each 264-byte Event, half a row's size again in memory traffic,
	// would charge it for the harness's work, which the TiCDC model, handed
	// pointers, does not pay.
	evs [][]codec.Event
	rls []*msgpbench.RedoLog
}

// peerData is a workload's input, made before the clock starts.
type peerData struct {
	n    int
	buf  []byte // every record's codec encoding, back to back
	ends []int  // end offset of each record in buf
	// Ten columns: the pools of rows (codec and TiCDC's msgp shape of the
	// same rows), stamped with the record's id, ts and table on use.
	pool   []codec.Event
	rpool  []*msgpbench.RedoLog
	tables []*msgpbench.TableName
	hash   uint32 // CRC32C of buf
}

func peerTs(txn int) uint64 { return bench.TsBase + 1 + uint64(txn) }

// peerID is record i's primary key: large enough that its encoding has the
// same length for every record.
func peerID(i int) int64 { return 1<<40 + int64(i) }

// makeRow1 is a one-column workload's row: an id and one BLOB column of
// words and numbers (compressible as text is), about size bytes encoded.
func makeRow1(r *rand.Rand, size int) codec.Event {
	ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: peerTs(0) - 1, CommitTs: peerTs(0), Table: bench.Table(0),
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(peerID(0))},
			{Name: "data", Type: codec.TypeBlob, Flags: codec.FlagBinary, Charset: "binary", Collation: "binary", Value: codec.BytesValue(nil)},
		},
	}}
	base := len(codec.AppendEvent(nil, &ev))
	ev.Row.Columns[1].Value = codec.BytesValue(words(r, size-base-2))
	return ev
}

// makeRow10 is a ten-column row like TiCDC's (the row of codec's and
// msgpbench's benchmarks): ints, varchars, a decimal, a double, a datetime,
// an enum, a binary hash and a BLOB that brings it to about size bytes.
func makeRow10(r *rand.Rand, size int) codec.Event {
	const utf8, coll = "utf8mb4", "utf8mb4_bin"
	first := []string{"Alice", "Bob", "Chen", "Dana", "Emeka", "Fatima", "Goran", "Hiro", "Ines", "Jonas"}
	last := []string{"Johnson-Smith", "Okafor", "Nakamura", "Silva", "Novak", "Larsen", "Haddad", "Moreau"}
	name := first[r.IntN(len(first))] + " " + last[r.IntN(len(last))]
	hash := make([]byte, 20)
	for i := range hash {
		hash[i] = byte(r.Uint32())
	}
	cols := []codec.Column{
		{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(peerID(0))},
		{Name: "account_id", Type: codec.TypeLonglong, Flags: codec.FlagUnsigned | codec.FlagMultipleKey, Value: codec.UintValue(uint64(r.IntN(1_000_000_000)))},
		{Name: "customer_name", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: utf8, Collation: coll, Value: codec.StringValue(name)},
		{Name: "email", Type: codec.TypeVarchar, Flags: codec.FlagUniqueKey, Charset: utf8, Collation: coll, Value: codec.StringValue(fmt.Sprintf("%s.%d@example.com", strings.ToLower(first[r.IntN(len(first))]), r.IntN(100000)))},
		{Name: "balance", Type: codec.TypeNewDecimal, Flags: codec.FlagBinary, Value: codec.DecimalValue(fmt.Sprintf("%d.%02d", r.IntN(1_000_000), r.IntN(100)))},
		{Name: "score", Type: codec.TypeDouble, Flags: codec.FlagNullable, Value: codec.Float64Value(float64(r.IntN(100000)) / 1000)},
		{Name: "created_at", Type: codec.TypeDatetime, Flags: codec.FlagBinary, Value: codec.DatetimeValue(codec.DateTime{Year: 2026, Month: uint8(1 + r.IntN(12)), Day: uint8(1 + r.IntN(28)), Hour: uint8(r.IntN(24)), Minute: uint8(r.IntN(60)), Second: uint8(r.IntN(60)), Microsecond: uint32(r.IntN(1_000_000)), Fsp: 6})},
		{Name: "status", Type: codec.TypeEnum, Charset: utf8, Collation: coll, Value: codec.EnumValue(uint64(1 + r.IntN(4)))},
		{Name: "avatar_hash", Type: codec.TypeString, Flags: codec.FlagBinary | codec.FlagNullable, Charset: "binary", Collation: "binary", Value: codec.BytesValue(hash)},
		{Name: "notes", Type: codec.TypeBlob, Flags: codec.FlagNullable | codec.FlagBinary, Charset: "binary", Collation: "binary", Value: codec.BytesValue(nil)},
	}
	ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: peerTs(0) - 1, CommitTs: peerTs(0), Table: bench.Table(0), Columns: cols,
	}}
	base := len(codec.AppendEvent(nil, &ev))
	ev.Row.Columns[9].Value = codec.BytesValue(words(r, size-base-2))
	return ev
}

var wordList = strings.Fields(`order shipped pending customer account balance invoice
payment refund credit debit warehouse berlin paris tokyo lisbon oslo express standard
priority parcel returned delivered cancelled gift wrap fragile glass second attempt call
on arrival leave at door signature required north south east west alpha beta gamma delta
premium basic member since discount coupon summer winter sale item quantity price total`)

// words is n bytes of words and numbers.
func words(r *rand.Rand, n int) []byte {
	var sb strings.Builder
	for sb.Len() < n {
		if r.IntN(6) == 0 {
			fmt.Fprintf(&sb, "%d ", r.IntN(100000))
		} else {
			sb.WriteString(wordList[r.IntN(len(wordList))])
			sb.WriteByte(' ')
		}
	}
	return []byte(sb.String()[:max(n, 0)])
}

// peerTables are the spans' tables, named once: stamp runs in the timed
// loop of the logs that take rows, and naming a table there (a Sprintf per
// row, about a fifth of W1-10col's CPU) would charge them the harness's work,
// which the TiCDC model, with its tables named once too, does not pay.
var peerTables = func() []codec.TableName {
	t := make([]codec.TableName, peerSpans)
	for s := range t {
		t[s] = bench.Table(s)
	}
	return t
}()

// stamp makes pool row ev record i: its id, commit ts (its transaction's),
// start ts and table (its transaction's span).
func stamp(ev *codec.Event, i int) {
	txn := i / peerTxnRows
	ev.Row.CommitTs, ev.Row.StartTs = peerTs(txn), peerTs(txn)-1
	ev.Row.Table = peerTables[txn%peerSpans]
	ev.Row.Columns[0].Value = codec.IntValue(peerID(i))
}

// peerPoolRows is the number of distinct rows a workload cycles through
// (about 4 MiB of 512 B rows: far more than lz4's 64 KiB window).
const peerPoolRows = 8192

// makePeerData builds a workload's input: every record encoded (codec) into
// one buffer, and for ten columns the row pools too.
func makePeerData(c Cell, needRows bool) *peerData {
	d := &peerData{n: c.Records}
	r := rand.New(rand.NewPCG(uint64(c.Cols), 0x5eed))
	d.pool = make([]codec.Event, peerPoolRows)
	for i := range d.pool {
		if c.Cols == 10 {
			d.pool[i] = makeRow10(r, c.RowSize)
		} else {
			d.pool[i] = makeRow1(r, c.RowSize)
		}
	}
	d.buf = make([]byte, 0, c.Records*(c.RowSize+16))
	d.ends = make([]int, c.Records)
	for i := range c.Records {
		ev := &d.pool[i%peerPoolRows]
		stamp(ev, i)
		d.buf = codec.AppendEvent(d.buf, ev)
		d.ends[i] = len(d.buf)
	}
	d.hash = crc32.Checksum(d.buf, crc32.MakeTable(crc32.Castagnoli))
	if needRows {
		for _, t := range peerTables {
			d.tables = append(d.tables, &msgpbench.TableName{Schema: t.Schema, Table: t.Name, TableID: t.PhysicalID})
		}
		d.rpool = make([]*msgpbench.RedoLog, len(d.pool))
		for i := range d.pool {
			d.rpool[i] = msgpbench.FromEvent(&d.pool[i])
		}
	} else {
		d.pool = nil
	}
	return d
}

// rowsLog says whether a log of the ten-column variant takes rows (and
// encodes them itself) rather than bytes.
func rowsLog(c Cell) bool { return c.Cols == 10 && c.Peer != "raw-append" }

func (d *peerData) start(i int) int {
	if i == 0 {
		return 0
	}
	return d.ends[i-1]
}

// txn fills t with the transaction of records [i, j).
func (d *peerData) txn(c Cell, t *peerTxn, i, j int) {
	txn := i / peerTxnRows
	t.span, t.ts = txn%peerSpans, peerTs(txn)
	t.recs, t.evs, t.rls = t.recs[:0], t.evs[:0], t.rls[:0]
	t.bytes = d.buf[d.start(i):d.ends[j-1]]
	if !rowsLog(c) {
		for k := i; k < j; k++ {
			t.recs = append(t.recs, d.buf[d.start(k):d.ends[k]])
		}
		return
	}
	if strings.HasPrefix(c.Peer, "ticdc") {
		for k := i; k < j; k++ {
			rl := d.rpool[k%peerPoolRows]
			rl.RedoRow.Row.CommitTs, rl.RedoRow.Row.StartTs = t.ts, t.ts-1
			rl.RedoRow.Row.Table = d.tables[t.span]
			rl.RedoRow.Columns[0].Value = peerID(k)
			t.rls = append(t.rls, rl)
		}
		return
	}
	for k := i; k < j; k++ {
		stamp(&d.pool[k%peerPoolRows], k)
	}
	for k := i; k < j; {
		from := k % peerPoolRows
		to := min(from+j-k, peerPoolRows)
		t.evs = append(t.evs, d.pool[from:to])
		k += to - from
	}
}

func cpuSeconds() float64 {
	cpu, _ := usage()
	return cpu
}

// usage is the process's CPU seconds (user + sys) and minor page faults so
// far. Faults show what touching fresh memory costs: on a virtual machine a
// first touch of a 4 KiB page can cost far more than copying into it.
func usage() (cpu float64, minorFaults int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds(), ru.Minflt
}

func runPeerCell(ctx context.Context, in childInput, res *Result) error {
	c := in.Cell
	if c.Cols == 0 {
		c.Cols = 1
	}
	dir, err := os.MkdirTemp(in.Dir, "redokit-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	d := makePeerData(c, rowsLog(c))
	payload := int64(len(d.buf))
	if err := warmInput(dir, d.buf); err != nil {
		return err
	}

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
	case "pebble-record":
		p, err = openPebblePeer(dir)
	case "tidwall-wal":
		p, err = openTidwallPeer(dir)
	case "ticdc-none", "ticdc-lz4":
		p, err = openTicdcPeer(dir, c.Peer == "ticdc-lz4")
	default:
		err = fmt.Errorf("unknown peer %q", c.Peer)
	}
	if err != nil {
		return err
	}
	// The idle log: input in memory, the log open, the generator's garbage
	// given back to the kernel, so that the growth from here is the log's
	// own (the "peak RSS above the idle writer").
	debug.FreeOSMemory()
	if how, err := resetPeakRSS(); err != nil {
		res.Info["rss_reset"] = "could not reset VmHWM (" + err.Error() + "): the growth counts from the process's start"
	} else {
		res.Info["rss_reset"] = how
	}
	m := res.Metrics
	m["rss_idle_mib"] = float64(currentRSS()) / mib
	var lat []float64
	var t peerTxn
	syncs := 0
	var since int64
	stopProfile := startCPUProfile(in)
	cpu0, faults0 := usage()
	t0 := time.Now()
	t1 := t0
	for i := 0; i < d.n; i += peerTxnRows {
		j := min(i+peerTxnRows, d.n)
		d.txn(c, &t, i, j)
		if err := p.append(ctx, &t); err != nil {
			p.close(ctx)
			return fmt.Errorf("%s: %w", c.Peer, err)
		}
		since += int64(len(t.bytes))
		due := j == d.n
		if c.SyncBytes > 0 {
			due = due || since >= c.SyncBytes
		} else {
			due = due || j%max(c.SyncEvery, peerTxnRows) == 0
		}
		if due {
			if err := p.sync(ctx, t.ts); err != nil {
				p.close(ctx)
				return fmt.Errorf("%s sync: %w", c.Peer, err)
			}
			syncs++
			since = 0
			now := time.Now()
			lat = append(lat, float64(now.Sub(t1))/float64(time.Millisecond))
			t1 = now
		}
	}
	if err := p.close(ctx); err != nil {
		return fmt.Errorf("%s close: %w", c.Peer, err)
	}
	el := time.Since(t0)
	cpu1, faults1 := usage()
	stopProfile()
	cpu := cpu1 - cpu0

	m["rows_s"] = float64(d.n) / el.Seconds()
	m["mib_s"] = float64(payload) / mib / el.Seconds()
	m["seconds"] = el.Seconds()
	m["cpu_s"] = cpu
	m["cpu_s_per_gib"] = cpu / (float64(payload) / (1 << 30))
	m["syncs"] = float64(syncs)
	m["minor_faults_per_mib"] = float64(faults1-faults0) / (float64(payload) / mib)
	m["batch_p50_ms"], m["batch_p99_ms"], m["batch_max_ms"] = bench.Percentiles(lat)
	disk := dirSize(dir)
	m["disk_mib"] = float64(disk) / mib
	m["disk_ratio"] = float64(payload) / float64(disk)
	m["payload_mib"] = float64(payload) / mib
	m["payload_bytes"] = float64(payload)
	m["received_bytes"] = float64(p.received())
	m["payload_crc32c"] = float64(d.hash)
	m["gomaxprocs"] = float64(runtime.GOMAXPROCS(0))
	m["rss_mib"] = float64(peakRSS()) / mib
	m["rss_grow_mib"] = m["rss_mib"] - m["rss_idle_mib"]
	if tp, ok := p.(*ticdcPeer); ok {
		m["msgp_bytes_per_row"] = float64(tp.n) / float64(d.n)
	}
	res.Info["received"] = fmt.Sprintf("%d bytes (payload %d, CRC32C %08x)", p.received(), payload, d.hash)

	if c.Peer == "raw-append" {
		// One core's lz4 block compression of the same bytes (at most 256
		// MiB of them), in the writer's 256 KiB blocks cut at record
		// boundaries, on one goroutine: the lz4-on target's other term.
		n := min(payload, 256*mib)
		k := 0
		for k < len(d.ends) && int64(d.ends[k]) <= n {
			k++
		}
		buf := d.buf[:d.ends[max(k-1, 0)]]
		_, comp, took, err := bench.LZ4Compress(bench.Blocks(buf, d.ends[:k]))
		if err != nil {
			return err
		}
		m["lz4c_1core_mib_s"] = float64(len(buf)) / mib / took.Seconds()
		m["lz4_ratio"] = float64(len(buf)) / float64(comp)
	}
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

// counted is the received() of the logs that take the bytes handed to them.
type counted struct{ n int64 }

func (c *counted) received() int64 { return c.n }

func (c *counted) count(t *peerTxn) {
	for _, r := range t.recs {
		c.n += int64(len(r))
	}
}

type rawPeer struct {
	counted
	f *os.File
}

func openRawPeer(dir string) (peerLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	return &rawPeer{f: f}, err
}

func (p *rawPeer) append(_ context.Context, t *peerTxn) error {
	// The transaction's records are contiguous: one write, as a buffered
	// appender would do, without a copy.
	p.count(t)
	_, err := p.f.Write(t.bytes)
	return err
}
func (p *rawPeer) sync(context.Context, uint64) error { return fdatasync(p.f) }
func (p *rawPeer) close(context.Context) error        { return p.f.Close() }

type redokitPeer struct {
	w       *writer.Writer
	done    func(context.Context) error
	payload int64
}

func (p *redokitPeer) received() int64 { return p.payload }

func openRedokitPeer(ctx context.Context, dir string, lz bool) (peerLog, error) {
	b, err := local.New(dir, nil)
	if err != nil {
		return nil, err
	}
	comp := writer.CompressionNone
	if lz {
		comp = writer.CompressionLZ4
	}
	// Syncs only when the harness says (the interval trigger out of the
	// way), so that its cadence is the workload's. FlushBytes stays at its
	// default: between the harness's syncs, every 16 MiB written while the
	// resolved ts stands still are staged (appended, compressed on the
	// workers, not synced), so production, compression and appends overlap
	// in a transaction or a sync interval larger than that (W2).
	const quota = 256 << 20
	w, err := writer.Open(ctx, b, &writer.Options{LogID: "peer", WriterID: "w0", FlushInterval: time.Hour,
		MemoryQuota: quota, Compression: comp})
	if err != nil {
		b.Close()
		return nil, err
	}
	for s := range peerSpans {
		if err := w.AddSpan(writer.SpanID(s), bench.TsBase); err != nil {
			return nil, err
		}
	}
	p := &redokitPeer{w: w}
	p.done = func(ctx context.Context) error {
		err := w.Close(ctx)
		p.payload = w.Stats().PayloadBytes
		return errors.Join(err, b.Close())
	}
	return p, nil
}

func (p *redokitPeer) append(ctx context.Context, t *peerTxn) error {
	if len(t.evs) > 0 {
		for _, evs := range t.evs {
			if err := p.w.Write(ctx, writer.SpanID(t.span), evs...); err != nil {
				return err
			}
		}
		return nil
	}
	return p.w.WriteEncoded(ctx, writer.SpanID(t.span), t.recs...)
}

func (p *redokitPeer) sync(ctx context.Context, ts uint64) error {
	for s := range peerSpans {
		if err := p.w.AdvanceResolved(writer.SpanID(s), ts); err != nil {
			return err
		}
	}
	_, err := p.w.Flush(ctx)
	return err
}

func (p *redokitPeer) close(ctx context.Context) error { return p.done(ctx) }

type etcdPeer struct {
	counted
	w    *etcdwal.WAL
	idx  uint64
	ents []raftpb.Entry
}

func openEtcdPeer(dir string) (peerLog, error) {
	w, err := etcdwal.Create(zap.NewNop(), filepath.Join(dir, "etcd"), nil)
	return &etcdPeer{w: w}, err
}

func (p *etcdPeer) append(_ context.Context, t *peerTxn) error {
	p.count(t)
	for _, r := range t.recs {
		p.idx++
		p.ents = append(p.ents, raftpb.Entry{Term: 1, Index: p.idx, Type: raftpb.EntryNormal, Data: r})
	}
	return nil
}

func (p *etcdPeer) sync(context.Context, uint64) error {
	err := p.w.Save(raftpb.HardState{Term: 1, Commit: p.idx}, p.ents)
	clear(p.ents)
	p.ents = p.ents[:0]
	return err
}
func (p *etcdPeer) close(context.Context) error { return p.w.Close() }

type wlogPeer struct {
	counted
	w *wlog.WL
}

func openWlogPeer(dir string) (peerLog, error) {
	w, err := wlog.NewSize(slog.New(slog.DiscardHandler), nil, filepath.Join(dir, "wlog"), wlog.DefaultSegmentSize, compression.None)
	return &wlogPeer{w: w}, err
}

func (p *wlogPeer) append(_ context.Context, t *peerTxn) error {
	p.count(t)
	return p.w.Log(t.recs...)
}
func (p *wlogPeer) sync(context.Context, uint64) error { return p.w.Sync() }
func (p *wlogPeer) close(context.Context) error        { return p.w.Close() }

type pebblePeer struct {
	counted
	f  *os.File
	bw *bufio.Writer
	w  *record.Writer
}

func openPebblePeer(dir string) (peerLog, error) {
	f, err := os.OpenFile(filepath.Join(dir, "000001.log"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	return &pebblePeer{f: f, bw: bw, w: record.NewWriter(bw)}, nil
}

func (p *pebblePeer) append(_ context.Context, t *peerTxn) error {
	p.count(t)
	for _, r := range t.recs {
		if _, err := p.w.WriteRecord(r); err != nil {
			return err
		}
	}
	return nil
}

func (p *pebblePeer) sync(context.Context, uint64) error {
	// record.Writer.Flush flushes the bufio.Writer too (it is a flusher).
	if err := p.w.Flush(); err != nil {
		return err
	}
	return fdatasync(p.f)
}

func (p *pebblePeer) close(context.Context) error {
	return errors.Join(p.w.Close(), p.bw.Flush(), fdatasync(p.f), p.f.Close())
}

type tidwallPeer struct {
	counted
	l   *tidwal.Log
	idx uint64
	b   tidwal.Batch
}

func openTidwallPeer(dir string) (peerLog, error) {
	l, err := tidwal.Open(filepath.Join(dir, "tidwall"), &tidwal.Options{NoSync: false, SegmentSize: 20 << 20, LogFormat: tidwal.Binary})
	return &tidwallPeer{l: l}, err
}

func (p *tidwallPeer) append(_ context.Context, t *peerTxn) error {
	p.count(t)
	for _, r := range t.recs {
		p.idx++
		p.b.Write(p.idx, r)
	}
	return nil
}

func (p *tidwallPeer) sync(context.Context, uint64) error {
	err := p.l.WriteBatch(&p.b)
	p.b.Clear()
	return err
}
func (p *tidwallPeer) close(context.Context) error { return p.l.Close() }

// ticdcPeer models TiCDC's file redo writer (ticdc-redo.md §1 and §2): msgp
// records framed with an 8-byte little-endian length word (low 56 bits the
// length, top byte 0x80|padding when the record is padded to 8 bytes), no
// checksum; a 128 KiB write buffer (TiCDC writes through etcd's PageWriter);
// optionally one lz4 frame per file; rotation at 64 MiB of uncompressed
// frames: flush, fsync, rename .log.tmp to the name carrying the file's max
// commit ts, fsync the directory.
type ticdcPeer struct {
	dir   string
	lz    bool
	f     *os.File
	bw    *bufio.Writer
	zw    *lz4.Writer
	out   io.Writer // zw or bw
	size  int64     // uncompressed frame bytes in the current file
	maxTs uint64
	files int
	n     int64 // msgp bytes (with TiCDC's 4-byte prefix) received
	buf   []byte
}

const ticdcMaxLogSize = 64 << 20

func openTicdcPeer(dir string, lz bool) (peerLog, error) {
	p := &ticdcPeer{dir: dir, lz: lz}
	if lz {
		p.zw = lz4.NewWriter(nil)
	}
	return p, p.open()
}

func (p *ticdcPeer) received() int64 { return p.n }

func (p *ticdcPeer) tmpName() string {
	return filepath.Join(p.dir, fmt.Sprintf("capture_cf_row_%d_%06d.log.tmp", bench.TsBase, p.files))
}

func (p *ticdcPeer) open() error {
	f, err := os.OpenFile(p.tmpName(), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	p.f, p.size = f, 0
	if p.bw == nil {
		p.bw = bufio.NewWriterSize(f, 128<<10)
	} else {
		p.bw.Reset(f)
	}
	p.out = p.bw
	if p.lz {
		p.zw.Reset(p.bw)
		p.out = p.zw
	}
	return nil
}

// rotate closes the current file (final: without opening the next).
func (p *ticdcPeer) rotate(final bool) error {
	if p.lz {
		if err := p.zw.Close(); err != nil { // the frame's end mark
			return err
		}
	}
	if err := p.bw.Flush(); err != nil {
		return err
	}
	if err := fdatasync(p.f); err != nil {
		return err
	}
	if err := p.f.Close(); err != nil {
		return err
	}
	name := filepath.Join(p.dir, fmt.Sprintf("capture_cf_row_%d_%06d.log", p.maxTs, p.files))
	if err := os.Rename(p.tmpName(), name); err != nil {
		return err
	}
	if err := syncDir(p.dir); err != nil {
		return err
	}
	p.files++
	if final {
		return nil
	}
	return p.open()
}

func (p *ticdcPeer) append(_ context.Context, t *peerTxn) error {
	for _, rl := range t.rls {
		// The frame: length word, msgp record, zero padding to 8 bytes.
		b, n := appendTicdcFrame(p.buf[:0], rl)
		p.n += int64(n)
		p.buf = b
		if p.size > 0 && p.size+int64(len(b)) > ticdcMaxLogSize {
			if err := p.rotate(false); err != nil {
				return err
			}
		}
		if _, err := p.out.Write(b); err != nil {
			return err
		}
		p.size += int64(len(b))
		p.maxTs = max(p.maxTs, rl.RedoRow.Row.CommitTs)
	}
	return nil
}

func (p *ticdcPeer) sync(context.Context, uint64) error {
	if p.lz {
		if err := p.zw.Flush(); err != nil {
			return err
		}
	}
	if err := p.bw.Flush(); err != nil {
		return err
	}
	return fdatasync(p.f)
}

func (p *ticdcPeer) close(context.Context) error { return p.rotate(true) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// warmInput writes the input once through write(2) (rawAppend, one sync)
// to a file it deletes, before any log opens. The first time the kernel
// reads a buffer the process has just written costs several times what
// later reads do on this machine (a standalone program: about 2 CPU s/GiB,
// then 0.4), and the raw append, which writes straight from the input,
// would pay it inside its clock while the logs that copy the input in user
// space first would not. The deleted file's page cache goes back to the
// free lists warm, for whichever log runs next. Every log gets the same
// step.
func warmInput(dir string, buf []byte) error {
	name := filepath.Join(dir, "warm-up")
	_, err := rawAppend(name, [][]byte{buf}, 1, true)
	return errors.Join(err, os.Remove(name))
}

// gcSeconds is the CPU the Go runtime has spent collecting garbage so far
// (runtime/metrics' estimate): the share of a cell's CPU that its
// allocations, not its work, cost.
func gcSeconds() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// machineBusySeconds is the CPU time every process of the machine has spent
// so far (/proc/stat: user, nice, system, irq and softirq, in USER_HZ ticks of 1/100
// s), 0 where there is no /proc: beside a process's own CPU, it shows what
// a database server spent on the same work.
func machineBusySeconds() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for _, i := range []int{1, 2, 3, 6, 7} { // user, nice, system, irq, softirq
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return 0
		}
		busy += v
	}
	return busy / 100
}
