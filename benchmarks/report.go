package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redokit/redokit/testkit/bench"
)

// Report is everything a run measured; results.json holds it whole.
type Report struct {
	Tool     string            `json:"tool"`
	Machine  Machine           `json:"machine"`
	Quick    bool              `json:"quick"`
	Reps     int               `json:"repetitions"`
	Seconds  float64           `json:"run_seconds"`
	Backends []*Backend        `json:"backends"`
	Cells    []CellReport      `json:"cells"`
	Targets  []Target          `json:"targets"`
	Peers    map[string]string `json:"peer_descriptions"`
	Method   []string          `json:"method"`
}

// CellReport is one cell over its repetitions.
type CellReport struct {
	Cell    Cell                     `json:"cell"`
	Metrics map[string]bench.Summary `json:"metrics"`
	// Pooled percentiles over every repetition's raw samples.
	Pooled map[string]Pooled `json:"pooled,omitempty"`
	Errors []string          `json:"errors,omitempty"`
	Wall   []float64         `json:"wall_s"`
	// Apply cells: why the sink was not available (no repetition
	// measured), and what the last repetition recorded of the sink
	// (server version, durability settings).
	Unavailable string            `json:"unavailable,omitempty"`
	Info        map[string]string `json:"info,omitempty"`
}

// Pooled are percentiles of samples from every repetition together.
type Pooled struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Target is one goal of the issues, judged on this run.
type Target struct {
	Goal    string  `json:"goal"`
	Backend string  `json:"backend"`
	Cell    string  `json:"cell"`
	Metric  string  `json:"metric"`
	Need    float64 `json:"need"`
	// Cmp is "≤" when the goal is an upper bound; "" (or "≥") a lower one.
	Cmp      string        `json:"cmp,omitempty"`
	Measured bench.Summary `json:"measured"`
	Verdict  string        `json:"verdict"` // met | not met | not measured
	Note     string        `json:"note,omitempty"`
}

func buildReport(mach Machine, backends []*Backend, cells []Cell, results map[string][]*Result, quick bool, reps int, took time.Duration) *Report {
	r := &Report{Tool: "github.com/redokit/redokit/benchmarks", Machine: mach, Quick: quick, Reps: reps,
		Seconds: took.Seconds(), Peers: peerDesc, Method: methodNotes()}
	for _, be := range backends {
		cp := *be
		cp.URL = be.redactedURL()
		r.Backends = append(r.Backends, &cp)
	}
	for _, c := range cells {
		cr := summarizeCell(c, results[c.ID])
		cr.Pooled = map[string]Pooled{}
		samples := map[string][]float64{}
		for _, res := range results[c.ID] {
			if res.Err == "" {
				for k, v := range res.Samples {
					samples[k] = append(samples[k], v...)
				}
			}
		}
		for k, v := range samples {
			if len(v) > 0 {
				p50, p99, mx := bench.Percentiles(v)
				cr.Pooled[k] = Pooled{N: len(v), P50: bench.Sig(p50), P99: bench.Sig(p99), Max: bench.Sig(mx)}
			}
		}
		if c.Kind == "apply" {
			applyInfo(&cr, results[c.ID])
		}
		r.Cells = append(r.Cells, cr)
	}
	r.Targets = judgeTargets(r)
	return r
}

func methodNotes() []string {
	return []string{
		"Every cell runs at least 3 times; the rounds are interleaved (each round runs every cell once, in a rotated order), and each repetition runs in a child process of its own (its own peak RSS, VmHWM).",
		"Figures are the median over the repetitions, with the min–max range in brackets; a figure whose range is wider than 20% of its median is labelled noisy. The machine is shared: noise is reported, not hidden.",
		"MiB = 2^20 bytes. Payload = the encoded events (codec.AppendEvent); stored = the bytes written to storage (segment headers, compressed blocks, footers).",
		"Throughput phase: W writers, each with 8 spans, write transactions of 16 rows (DDL mix: 4 rows + 1 DDL) flat out for the cell's seconds, advancing each span's resolved ts after each transaction; the harness calls Writer.Flush every flush interval (the writer's own interval timer is off, its 16 MiB size trigger on; -quick sets the writers' memory quota to 64 MiB so the backlog left at the end stays short). Throughput = durable rows (and payload) ÷ the time from the first write to the return of the final Flush. What is counted: each writer replays a pool of transactions generated before the clock starts (about 4 MiB of encoded events per writer, 128 to 2048 transactions, every row distinct, generated before the writers open; its heap is gen_pool_mib in results.json and is in the peak RSS), stamping a fresh commit ts, start ts and row id on each event; so the figures hold Writer.Write (which encodes the events with the codec: the writer's own work), AdvanceResolved, the flushes and that stamping (a few stores per event), and no generation. The baseline \"encode\" is the codec alone replaying writer 0's pool again (stamp + codec.AppendEvent).",
		"Latency phase: right after, the same writers run open loop at half the throughput just measured (for the cell's seconds, 0.5 s in -quick, at least 2.5 flush intervals), flushed on the same cadence. Flush latency = the time of one Flush call, from the call until the flush is durable and its progress published; p50/p99/max are per repetition, then the median over repetitions (pooled percentiles over every flush are in results.json). Flush latency at saturation (the throughput phase) is mostly queueing behind the backlog, and is reported apart.",
		"Requests per flush = the blob.Bucket request counters (Stats) of the throughput phase ÷ completed flushes. PUTs include the writer's progress publication (a conditional write of its state object) on every flush; syncs are fdatasyncs of the active segment.",
		"Read = reader.Open over the whole log (both phases) and NextBatch until EOF: decoded (codec events, what apply uses) and, on local disk, raw (Options.Raw: the merge, CRC and lz4, no decoding).",
		"Reader memory by log size: 4 writers × N MiB of 512 B rows (lz4) built on local disk in the cell's child without fsync (local.Options.NoSync), then read whole twice, raw and decoded; before each read runtime.GC and debug.FreeOSMemory, then the process's peak RSS (VmHWM) is reset by writing 5 to /proc/self/clear_refs (if that fails, the peak is sampled from VmRSS every 2 ms and the report says so), and the peak RSS is VmHWM after the read. The ceiling decompresses the log's stored lz4 blocks on one thread. The log's files are in the page cache during the reads (the machine has the memory), so the reads are not disk-bound.",
		"Sort-then-merge reader: a model of TiCDC's `redo apply` reader (pkg/redo/reader/{reader,file}.go) on the read cell's log, in the same child after redokit's two reads, measured the same way (runtime.GC, debug.FreeOSMemory, VmHWM reset): the log's segments listed through the bucket; 16 workers each read a whole segment, decode every record (codec.Decoder) into an event of its own held in memory, sort them by (commit ts, start ts, delete < update < insert), and write those in the range to a local sorted file (4-byte length + codec.AppendEvent bytes) beside the log; then a k-way heap merge of the sorted files, each read through a 4 KiB bufio.Reader and decoded event by event. Its time runs from the listing to the last merged event. Where it departs from TiCDC it is in TiCDC's favour (redokit's codec instead of msgpack, pdqsort instead of a heap sort, no fsync of the sorted files, one reused event per file in the merge, no channel to a consumer), so the ratio is a lower bound. Its events are checked against redokit's decoded read: the same count, non-decreasing commit ts in both, the same commit-ts sequence and the same events (a hash of each event's ts, table and row id, summed); a difference fails the repetition.",
		"Sort-then-merge reader on TiCDC-format files (the closer model, the one the target uses): before its clock starts, the log is read with redokit's reader and its events written, per writer of the log, through the model of TiCDC's file writer with lz4 (the ticdc-lz4 peer: each row msgp-encoded in TiCDC's RedoLog shape behind 0xff 0xff + version, framed with an 8-byte length word and zero padding to 8 bytes, no checksum, one pierrec/lz4 frame per file, files rotated at 64 MiB of frames) into a folder beside the log. Timed, measured the same way: the files listed (kept when the commit ts in the name is above the start); 16 workers each read a whole file, inflate it, decode every record with msgp into a RedoLog of its own held in memory, sort, drop those outside the range and write a sorted file of msgp records in TiCDC's framing (as TiCDC's sortAndWriteFile does); then the k-way heap merge reads them through 4 KiB bufio.Readers and msgp-decodes each record. Still in TiCDC's favour: pdqsort, no fsync of the sorted files, records sliced from the inflated file instead of copied, one reused RedoLog per sorted file in the merge, no conversion of the RedoLog into TiCDC's row events, no channel. Checked with the same digest (the msgp record's commit ts, start ts, table ID and first column's int64); a difference fails the repetition. The variant on redokit's codec stays beside it as a lower bound of the ratio.",
		"Baselines run in the same child right after the writer, on writer 0's pool replayed and encoded again (at most 16 MiB in -quick, 256 MiB otherwise): encode (codec.AppendEvent of pre-generated events with fresh ts and ids: part of the writer's own work); memory copy; lz4 (pierrec/lz4 Compressor, the writer's 256 KiB blocks) compress on one thread and decompress on 1 and GOMAXPROCS threads; local disk: append to a file on the same file system as many bytes as the writer wrote in its throughput phase (the sample repeated, at most 1 GiB) with as many fdatasyncs as it made (none on local-nosync), the payload as is and lz4-compressed; the naive lz4 pipeline adds the one-thread compression time of the sample to that append, per byte; object stores: PUT then GET of objects of the writer's mean segment size, made of the bytes it stored, through the same blob.Bucket (the same SDK and driver).",
		"Ratios are computed inside each repetition (writer ÷ its own baseline measured minutes apart at most), then summarised like any figure.",
		"Apply: each ratio compares apply.Run with a baseline run in the same child into another fresh downstream of the same sink, server and durability settings: MariaDB with innodb_flush_log_at_trx_commit=1 (sync_binlog=1 when the binary log is on), PostgreSQL with fsync and synchronous_commit on, SQLite in WAL with synchronous=NORMAL (the sink's default, commits not synced) or FULL (the `-full` cell: the WAL synced at each commit); the settings measured with are in each cell's row. The naive baseline commits each row change; the bulk load (LOAD DATA LOCAL INFILE, COPY FROM STDIN, one transaction of prepared INSERTs) commits once; apply.Run commits every 8,192 rows per worker and at each DDL.",
	}
}

func (r *Report) cell(pred func(Cell) bool) []*CellReport {
	var out []*CellReport
	for i := range r.Cells {
		if pred(r.Cells[i].Cell) {
			out = append(out, &r.Cells[i])
		}
	}
	return out
}

// verdict is the verdict of the target on cell id, or "not measured".
func (r *Report) verdict(id string) string {
	verdict := "not measured"
	for _, t := range r.Targets {
		if t.Cell == id {
			verdict = t.Verdict
		}
	}
	return verdict
}

func judgeTargets(r *Report) []Target {
	var ts []Target
	add := func(goal string, need float64, metric string, cr *CellReport, note string) {
		t := Target{Goal: goal, Backend: cr.Cell.Backend, Cell: cr.Cell.ID, Metric: metric, Need: need, Note: note}
		s, ok := cr.Metrics[metric]
		switch {
		case !ok:
			t.Verdict = "not measured"
			if len(cr.Errors) > 0 {
				t.Note = strings.TrimSpace(t.Note + " " + firstLine(cr.Errors[0]))
			}
		case s.Median >= need:
			t.Verdict = "met"
		default:
			t.Verdict = "not met"
		}
		if ok {
			t.Measured = s
			if s.Min < need && s.Max >= need {
				if t.Note != "" {
					t.Note += "; "
				}
				t.Note += "the spread crosses the line"
			}
		}
		ts = append(ts, t)
	}
	for _, cr := range r.cell(func(c Cell) bool { return c.hasRole(roleLZ4Off) }) {
		add("writer, lz4 off ≥ 0.9× raw append (same bytes, same fsync cadence)", 0.9, "ratio_raw", cr, "")
	}
	for _, cr := range r.cell(func(c Cell) bool { return c.hasRole(roleLZ4On) }) {
		add("writer, lz4 on ≥ 2× (raw append + single-thread lz4)", 2.0, "ratio_naive_lz4", cr, "")
	}
	for _, cr := range r.cell(func(c Cell) bool { return c.hasRole(roleCloud16) }) {
		add("cloud writer ≥ 0.9× raw PUT on 16 MiB segments (stored bytes)", 0.9, "ratio_raw", cr, "")
	}
	for _, cr := range r.cell(func(c Cell) bool {
		return c.hasRole(rolePrimary) && (c.Backend == "local-fsync" || c.Backend == "local-nosync")
	}) {
		add("reader merge (raw) ≥ 0.8× lz4 decompression ceiling (1 thread)", 0.8, "ratio_read_raw_ceiling", cr, "merge, CRC and lz4 without the codec")
		add("reader merge (decoded) ≥ 0.8× lz4 decompression ceiling (1 thread)", 0.8, "ratio_read_ceiling", cr, "with codec.DecodeEvent of every event")
	}
	reads := r.cell(func(c Cell) bool { return c.Kind == "read" })
	for _, cr := range reads {
		size := fmt.Sprintf(" — log of %d × %d MiB", cr.Cell.Writers, cr.Cell.LogMiB)
		add("reader merge (raw) ≥ 0.8× lz4 decompression ceiling (1 thread, stored blocks)"+size, 0.8, "ratio_read_raw_ceiling", cr, "merge, CRC and lz4 without the codec")
		add("reader merge (decoded) ≥ 0.8× lz4 decompression ceiling (1 thread, stored blocks)"+size, 0.8, "ratio_read_ceiling", cr, "with codec.DecodeEvent of every event")
		add("reader (decoded) ≥ 20× the sort-then-merge reader on TiCDC-format files (TiCDC redo apply model: lz4 files, msgp)"+size, 20, "ratio_read_ticdcmerge", cr,
			fmt.Sprintf("same events, same child; lower bound, the same model on redokit's segments and codec: %s; peak RSS (medians) %s MiB reader, %s MiB on TiCDC-format files (%.1f×), %s MiB on redokit's codec (%.1f×)",
				cr.ratio("ratio_read_sortmerge"), human(cr.m("read_rss_mib")), human(cr.m("ticdcmerge_rss_mib")), cr.m("ratio_rss_ticdcmerge_read"),
				human(cr.m("sortmerge_rss_mib")), cr.m("ratio_rss_sortmerge_read")))
	}
	if len(reads) >= 2 {
		small, large := reads[0], reads[0]
		for _, cr := range reads {
			if cr.Cell.LogMiB < small.Cell.LogMiB {
				small = cr
			}
			if cr.Cell.LogMiB > large.Cell.LogMiB {
				large = cr
			}
		}
		for _, mode := range []struct{ name, metric string }{{"raw", "read_raw_rss_mib"}, {"decoded", "read_rss_mib"}} {
			goal := fmt.Sprintf("reader peak RSS independent of log size (%s; %d × %d MiB ÷ %d × %d MiB ≤ 1.25)", mode.name,
				large.Cell.Writers, large.Cell.LogMiB, small.Cell.Writers, small.Cell.LogMiB)
			t := Target{Goal: goal, Backend: large.Cell.Backend, Cell: large.Cell.ID + " ÷ " + small.Cell.ID, Metric: mode.metric, Need: 1.25, Cmp: "≤"}
			ls, lok := large.Metrics[mode.metric]
			ss, sok := small.Metrics[mode.metric]
			switch {
			case !lok || !sok:
				t.Verdict = "not measured"
			default:
				var ratios []float64
				if len(ls.Samples) == len(ss.Samples) && len(large.Errors) == 0 && len(small.Errors) == 0 {
					// Repetition by repetition (round i of each).
					for i := range ls.Samples {
						ratios = append(ratios, ls.Samples[i]/ss.Samples[i])
					}
					t.Note = "ratio of the peak RSS, round by round"
				} else {
					ratios = []float64{ls.Median / ss.Median}
					t.Note = "ratio of the medians (a repetition failed)"
				}
				t.Measured = bench.Summarize(ratios)
				t.Verdict = "met"
				if t.Measured.Median > t.Need {
					t.Verdict = "not met"
				}
				if t.Measured.Min <= t.Need && t.Measured.Max > t.Need {
					t.Note += "; the spread crosses the line"
				}
			}
			ts = append(ts, t)
		}
	}
	for _, cr := range r.cell(func(c Cell) bool { return c.Kind == "apply" }) {
		if cr.Cell.Mix == applyInsert {
			add(applyGoal(cr), applyNeedBulk, "ratio_apply_bulk", cr, "")
		} else {
			add(applyGoal(cr), applyNeedOf(cr.Cell), "ratio_apply_naive", cr, applyNote(cr))
		}
		if cr.Unavailable != "" {
			ts[len(ts)-1].Note = "not available: " + cr.Unavailable
		}
	}
	return ts
}

// needText is a target's bound: "≥ 0.9×", "≤ 1.25×".
func (t Target) needText() string {
	cmp := t.Cmp
	if cmp == "" {
		cmp = "≥"
	}
	return fmt.Sprintf("%s %s×", cmp, strconv.FormatFloat(t.Need, 'f', -1, 64))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func writeReport(out string, r *Report) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for i := range r.Cells {
		for k, v := range r.Cells[i].Metrics {
			r.Cells[i].Metrics[k] = v.Rounded()
		}
	}
	for i := range r.Targets {
		r.Targets[i].Measured = r.Targets[i].Measured.Rounded()
	}
	js, err := json.Marshal(r) // compact: the file stays small; jq reads it
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), js, 0o644); err != nil {
		return err
	}
	charts, err := writeCharts(out, r)
	if err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	md := renderMarkdown(r, charts)
	if err := os.WriteFile(filepath.Join(out, "report.md"), []byte(md), 0o644); err != nil {
		return err
	}
	snip := renderSnippet(r)
	if err := os.WriteFile(filepath.Join(out, "README-snippet.md"), []byte(snip), 0o644); err != nil {
		return err
	}
	if filepath.Base(out) == "latest" {
		// benchmarks/results/README-snippet.md: the table for the README.
		_ = os.WriteFile(filepath.Join(filepath.Dir(out), "README-snippet.md"), []byte(snip), 0o644)
	}
	return nil
}

// ---- formatting ----

// human formats a number with k/M suffixes and about three significant digits.
func human(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "–"
	case a >= 10e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case a >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case a >= 100e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	case a >= 10e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case a >= 1000:
		return fmt.Sprintf("%.2fk", v/1e3)
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// fs formats a summary: "median (min–max)", and "noisy" when it is.
func fmtS(s bench.Summary, ok bool) string {
	if !ok || len(s.Samples) == 0 {
		return "–"
	}
	if len(s.Samples) == 1 {
		return human(s.Median)
	}
	out := fmt.Sprintf("%s (%s–%s)", human(s.Median), human(s.Min), human(s.Max))
	if s.Noisy {
		out += " **noisy**"
	}
	return out
}

func (cr *CellReport) f(metric string) string {
	s, ok := cr.Metrics[metric]
	return fmtS(s, ok)
}

// m returns the median of a metric, NaN when missing.
func (cr *CellReport) m(metric string) float64 {
	if s, ok := cr.Metrics[metric]; ok {
		return s.Median
	}
	return math.NaN()
}

func (cr *CellReport) ratio(metric string) string {
	s, ok := cr.Metrics[metric]
	if !ok {
		return "–"
	}
	out := fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Median, s.Min, s.Max)
	if s.Noisy {
		out += " **noisy**"
	}
	return out
}

func (cr *CellReport) errNote() string {
	if len(cr.Errors) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d repetitions failed: %s)", len(cr.Errors), len(cr.Wall), firstLine(cr.Errors[0]))
}

func renderMarkdown(r *Report, charts []string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	mode := "full matrix"
	if r.Quick {
		mode = "-quick subset"
	}
	p("# redokit benchmarks\n\n")
	p("Run of %s: %s, %d repetitions per cell, %.0f s in all. Generated by `go run ./benchmarks%s` (see benchmarks/README.md); every figure is in results.json beside this file.\n\n",
		r.Machine.Date, mode, r.Reps, r.Seconds, map[bool]string{true: " -quick", false: ""}[r.Quick])

	p("## Machine\n\n| | |\n|---|---|\n")
	p("| date (UTC) | %s |\n| CPU | %s |\n| cores / GOMAXPROCS | %d / %d |\n| memory | %.1f GiB |\n| kernel | %s |\n| Go | %s (%s) |\n",
		r.Machine.Date, r.Machine.CPU, r.Machine.Cores, r.Machine.GOMAXPROCS, r.Machine.MemGiB, r.Machine.Kernel, r.Machine.Go, r.Machine.OS)
	p("| local disk | %s: %s %s |\n| load average (start → end) | %s → %s |\n\n", r.Machine.Dir, r.Machine.FS, r.Machine.DiskRotational, r.Machine.LoadStart, r.Machine.LoadEnd)
	p("The S3, GCS and Azure figures are of local emulators (versitygw, fake-gcs-server, Azurite) on the same 2 cores as the benchmark: they show redokit's overhead against a raw PUT through the same SDK, not what a cloud region does.\n\n")

	p("## Targets\n\nEach verdict compares the median ratio with the goal; the ratio is taken inside each repetition against a baseline measured in the same child process. The load average of the machine during the run (%s → %s on %d cores, other work included) is why most figures are labelled noisy: read each verdict with its spread.\n\n", r.Machine.LoadStart, r.Machine.LoadEnd, r.Machine.Cores)
	p("| goal | backend | measured (median, min–max) | need | verdict |\n|---|---|---|---|---|\n")
	for _, t := range r.Targets {
		meas := "–"
		if len(t.Measured.Samples) > 0 {
			meas = fmt.Sprintf("%.2f× (%.2f–%.2f)", t.Measured.Median, t.Measured.Min, t.Measured.Max)
			if t.Measured.Noisy {
				meas += " **noisy**"
			}
		}
		verdict := "**" + t.Verdict + "**"
		if t.Note != "" {
			verdict += " (" + t.Note + ")"
		}
		p("| %s | %s | %s | %s | %s |\n", t.Goal, t.Backend, meas, t.needText(), verdict)
	}
	p("\n")

	p("## Backends\n\n| backend | status | what |\n|---|---|---|\n")
	for _, be := range r.Backends {
		st := "available"
		if !be.Available {
			st = "not available: " + be.Reason
		}
		p("| %s | %s | %s |\n", be.Name, st, be.Desc)
	}
	p("\n")

	// The primary cell per backend.
	prim := r.cell(func(c Cell) bool { return c.hasRole(rolePrimary) })
	if len(prim) > 0 {
		p("## Writer by backend\n\n512 B rows, flush every 100 ms, lz4, 1 writer. \"× raw\" is the writer's throughput over its raw baseline in the same repetition: on local disk payload MiB/s ÷ raw append of the same bytes with the same fsync cadence; on object stores stored MiB/s ÷ raw PUT of objects of the same size (and payload MiB/s ÷ raw PUT, the gain compression buys).\n\n")
		p("| backend | rows/s | payload MiB/s | stored MiB/s | raw baseline MiB/s | × raw | flush p50 / p99 / max ms | compression | PUT / LIST / DELETE / sync per flush | peak RSS MiB | read rows/s (decoded / raw) |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, cr := range prim {
			base, xr := cr.f("base_append_mib_s"), cr.ratio("ratio_raw")
			if _, ok := cr.Metrics["base_put_mib_s"]; ok {
				base = cr.f("base_put_mib_s") + " PUT"
				xr += " stored; " + cr.ratio("ratio_raw_payload") + " payload"
			} else {
				base += " append"
			}
			p("| %s%s | %s | %s | %s | %s | %s | %s / %s / %s | %s× | %s / %s / %s / %s | %s | %s / %s |\n",
				cr.Cell.Backend, cr.errNote(), cr.f("write_rows_s"), cr.f("write_mib_s"), cr.f("write_stored_mib_s"), base, xr,
				cr.f("flush_p50_ms"), cr.f("flush_p99_ms"), cr.f("flush_max_ms"), human(cr.m("comp_ratio")),
				human(cr.m("put_per_flush")), human(cr.m("list_per_flush")), human(cr.m("delete_per_flush")), human(cr.m("sync_per_flush")),
				cr.f("rss_write_mib"), cr.f("read_rows_s"), cr.f("read_raw_rows_s"))
		}
		p("\n")
	}
	for _, c := range charts {
		p("![%s](%s)\n\n", strings.TrimSuffix(c, ".svg"), c)
	}

	wcells := r.cell(func(c Cell) bool { return c.Kind == "writer" })
	if len(wcells) > 0 {
		p("## Every writer cell\n\n| backend | row B | flush ms | lz4 | writers | mix | rows/s | payload MiB/s | × raw | flush p50 / p99 / max ms (pooled n) | flush p50 at saturation ms | stored MiB (ratio) | PUT / sync per flush | peak RSS MiB | read rows/s | read raw rows/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, cr := range wcells {
			c := cr.Cell
			mix := c.Mix
			if c.SegmentMiB > 0 {
				mix += fmt.Sprintf(", %d MiB segments", c.SegmentMiB)
			}
			pl := cr.Pooled["flush_ms"]
			p("| %s%s | %d | %d | %s | %d | %s | %s | %s | %s | %s / %s / %s (%d) | %s | %s (%s×) | %s / %s | %s | %s | %s |\n",
				c.Backend, cr.errNote(), c.RowSize, c.FlushMS, c.Compression, c.Writers, mix, cr.f("write_rows_s"), cr.f("write_mib_s"), cr.ratio("ratio_raw"),
				cr.f("flush_p50_ms"), cr.f("flush_p99_ms"), cr.f("flush_max_ms"), pl.N, cr.f("flush_sat_p50_ms"), human(cr.m("stored_mib")), human(cr.m("comp_ratio")),
				human(cr.m("put_per_flush")), human(cr.m("sync_per_flush")), cr.f("rss_write_mib"), cr.f("read_rows_s"), cr.f("read_raw_rows_s"))
		}
		p("\n### Baselines of each writer cell (MiB/s of payload unless said)\n\n| backend | row B | flush ms | lz4 | writers | mix | encode (codec, pre-generated events) | memcpy | lz4 compress (1 thread) | lz4 decompress 1 / N threads | append | append lz4'd (stored MiB/s) | raw append + 1-thread lz4 | PUT (object MiB) | GET | read ceiling rows/s (1 thread) | read raw ÷ ceiling |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, cr := range wcells {
			c := cr.Cell
			put := "–"
			if _, ok := cr.Metrics["base_put_mib_s"]; ok {
				put = fmt.Sprintf("%s (%s)", cr.f("base_put_mib_s"), human(cr.m("base_put_obj_mib")))
			}
			p("| %s | %d | %d | %s | %d | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s | %s | %s | %s |\n",
				c.Backend, c.RowSize, c.FlushMS, c.Compression, c.Writers, c.Mix, cr.f("base_encode_mib_s"), cr.f("base_memcpy_mib_s"), cr.f("base_lz4c_mib_s"),
				cr.f("base_lz4d_mib_s"), cr.f("base_lz4d_par_mib_s"), cr.f("base_append_mib_s"), cr.f("base_append_lz4_mib_s"),
				cr.f("base_naive_lz4_mib_s"), put, cr.f("base_get_mib_s"), cr.f("ceiling_rows_s"), cr.ratio("ratio_read_raw_ceiling"))
		}
		p("\n")
	}

	renderReads(p, r)

	peers := r.cell(func(c Cell) bool { return c.Kind == "peer" })
	if len(peers) > 0 {
		c0 := peers[0].Cell
		p("## Against other WAL libraries\n\nThe same %d encoded events (%d B rows: an id and a BLOB), handed over in transactions of %d records with one durable sync per transaction, to a fresh directory on the local disk, at the inherited GOMAXPROCS: workload W1 of the fuller comparison `go run ./benchmarks -peers` (both GOMAXPROCS 1 and 2, more workloads, ratios paired per round, and the model of TiCDC's writer; see benchmarks/README.md). redokit's writer does more per sync than the others: it sorts by commit ts up to the resolved ts, compresses (lz4) and checksums per block, and ends each flush with a progress frame made durable by the same fdatasync (its state object is published lazily, off the flush path).\n\n", c0.Records, c0.RowSize, c0.SyncEvery)
		p("| library | rows/s | MiB/s | × raw append | CPU s/GiB | batch p50 / p99 / max ms | on disk MiB | peak RSS MiB | what |\n|---|---|---|---|---|---|---|---|---|\n")
		var raw float64 = math.NaN()
		for _, cr := range peers {
			if cr.Cell.Peer == "raw-append" {
				raw = cr.m("mib_s")
			}
		}
		for _, cr := range peers {
			p("| %s%s | %s | %s | %.2f× | %s | %s / %s / %s | %s | %s | %s |\n", cr.Cell.Peer, cr.errNote(), cr.f("rows_s"), cr.f("mib_s"), cr.m("mib_s")/raw,
				cr.f("cpu_s_per_gib"), cr.f("batch_p50_ms"), cr.f("batch_p99_ms"), cr.f("batch_max_ms"), human(cr.m("disk_mib")), cr.f("rss_mib"), peerDesc[cr.Cell.Peer])
		}
		p("\n")
	}

	p("## The cost of consistency: the redo gate\n\n")
	pipes := r.cell(func(c Cell) bool { return c.Kind == "pipeline" })
	if len(pipes) == 0 {
		p("Not run.\n\n")
	} else {
		c0 := pipes[0].Cell
		p("The toy CDC pipeline: generator → redo writer (flush every %d ms, %s) → SQLite downstream (one upsert transaction per batch). Gate on: through sinkgate.Gate, each event waits until the log's global resolved ts covers it (meta.Coordinator ticking every %v, meta.Watcher polling the meta object every %v). Gate off: the same redo writes, and the downstream gets each event at once. Throughput: flat out for %g s, rows in SQLite ÷ time until the last one is there. Latency: open loop at %d rows/s for %g s, from a transaction's due time to the commit of the downstream transaction holding it.\n\n",
			c0.FlushMS, c0.Compression, pipeCoordTick, pipeWatchPoll, c0.Seconds, c0.Rate, c0.Seconds)
		p("| backend | rows/s gate off | rows/s gate on | on ÷ off | e2e p50 off / on ms | e2e p99 off / on ms | e2e max on ms |\n|---|---|---|---|---|---|---|\n")
		byBe := map[string]map[string]*CellReport{}
		var order []string
		for _, cr := range pipes {
			if byBe[cr.Cell.Backend] == nil {
				byBe[cr.Cell.Backend] = map[string]*CellReport{}
				order = append(order, cr.Cell.Backend)
			}
			byBe[cr.Cell.Backend][cr.Cell.Gate] = cr
		}
		for _, be := range order {
			off, on := byBe[be]["off"], byBe[be]["on"]
			if off == nil || on == nil {
				continue
			}
			p("| %s%s%s | %s | %s | %.2f× | %s / %s | %s / %s | %s |\n", be, off.errNote(), on.errNote(), off.f("pipe_rows_s"), on.f("pipe_rows_s"),
				on.m("pipe_rows_s")/off.m("pipe_rows_s"), off.f("e2e_p50_ms"), on.f("e2e_p50_ms"), off.f("e2e_p99_ms"), on.f("e2e_p99_ms"), on.f("e2e_max_ms"))
		}
		p("\n")
	}

	renderApply(p, r)

	var failed []string
	for _, cr := range r.Cells {
		for _, e := range cr.Errors {
			failed = append(failed, fmt.Sprintf("- %s: %s", cr.Cell.ID, firstLine(e)))
		}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		p("## Failed repetitions\n\n%s\n\n", strings.Join(failed, "\n"))
	}
	p("## Method\n\n")
	for _, n := range r.Method {
		p("- %s\n", n)
	}
	return b.String()
}

// renderSnippet is the table for the README: the primary cell per backend
// and the targets.
func renderSnippet(r *Report) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("<!-- generated by go run ./benchmarks%s on %s; full report: benchmarks/results/latest/report.md -->\n",
		map[bool]string{true: " -quick", false: ""}[r.Quick], r.Machine.Date)
	p("Measured on %s (%d cores, %s, %s), %d repetitions, median (min–max). Object stores are local emulators sharing the 2 cores.\n\n", r.Machine.CPU, r.Machine.Cores, r.Machine.Go, strings.SplitN(r.Machine.FS, " (", 2)[0], r.Reps)
	p("| backend (512 B rows, 100 ms flushes, lz4) | rows/s | payload MiB/s | × raw baseline | flush p50 / p99 ms | read rows/s |\n|---|---|---|---|---|---|\n")
	for _, cr := range r.cell(func(c Cell) bool { return c.hasRole(rolePrimary) }) {
		base := "append"
		if _, ok := cr.Metrics["base_put_mib_s"]; ok {
			base = "PUT"
		}
		p("| %s | %s | %s | %.2f× %s | %s / %s | %s |\n", cr.Cell.Backend, human(cr.m("write_rows_s")), human(cr.m("write_mib_s")),
			cr.m("ratio_raw"), base, human(cr.m("flush_p50_ms")), human(cr.m("flush_p99_ms")), human(cr.m("read_rows_s")))
	}
	renderApplySnippet(p, r)
	p("\n| target | backend | measured | verdict |\n|---|---|---|---|\n")
	for _, t := range r.Targets {
		meas := "–"
		if len(t.Measured.Samples) > 0 {
			meas = fmt.Sprintf("%.2f×", t.Measured.Median)
		}
		p("| %s | %s | %s | %s |\n", t.Goal, t.Backend, meas, t.Verdict)
	}
	return b.String()
}

// renderReads is the section of the read cells: the reader's throughput and
// peak RSS at each log size, beside the lz4 ceiling on the same blocks.
func renderReads(p func(string, ...any), r *Report) {
	reads := r.cell(func(c Cell) bool { return c.Kind == "read" })
	if len(reads) == 0 {
		return
	}
	sort.SliceStable(reads, func(i, j int) bool { return reads[i].Cell.LogMiB < reads[j].Cell.LogMiB })
	p("## Reader memory by log size\n\n")
	p("A log of 4 writers × N MiB of payload (512 B rows, lz4, 8 spans per writer, written in parallel flat out with the writer's default flush triggers and 64 MiB segments) on local disk, built without fsync (local.Options.NoSync: the log is only read back, and its files stay in the page cache, which is not in the process's RSS), then read whole with reader.Open and NextBatch(1024), raw (Options.Raw) then decoded, each read after runtime.GC + debug.FreeOSMemory and a reset of the process's peak RSS (VmHWM, through /proc/self/clear_refs). Peak RSS = VmHWM at the end of the read: the whole process (the binary's pages, the Go runtime and what the build left), so the RSS at the start of the read and the growth above it (peak − start, within each repetition: what the read itself took) are shown beside it; the target compares the peaks. A writer's segments are 64 MiB, so the smaller log may have one segment per writer where the larger has several (see the segment counts below): the reader's lookahead of one segment per writer then has something to prefetch. The ceiling is the single-thread pierrec/lz4 decompression of the very blocks the log stores, segment by segment (only the decompression timed); × ceiling = the reader's rows/s ÷ the ceiling's, within each repetition.\n\n")
	p("| log | rows | payload MiB | stored MiB | read | rows/s | payload MiB/s | peak RSS MiB | RSS at start MiB | peak − start MiB | ceiling rows/s (1 thread) | × ceiling |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, cr := range reads {
		c := cr.Cell
		for _, mode := range []struct{ name, pre, ratio string }{{"raw", "read_raw", "ratio_read_raw_ceiling"}, {"decoded", "read", "ratio_read_ceiling"}} {
			p("| %d × %d MiB%s | %s | %s | %s (%s×) | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.Writers, c.LogMiB, cr.errNote(),
				human(cr.m("rows")), human(cr.m("payload_mib")), human(cr.m("stored_mib")), human(cr.m("comp_ratio")), mode.name,
				cr.f(mode.pre+"_rows_s"), cr.f(mode.pre+"_mib_s"), cr.f(mode.pre+"_rss_mib"), cr.f(mode.pre+"_rss_start_mib"),
				cr.f(mode.pre+"_rss_grow_mib"), cr.f("ceiling_rows_s"), cr.ratio(mode.ratio))
		}
	}
	p("\n")
	renderSortMerge(p, reads)
	var notes []string
	for _, cr := range reads {
		notes = append(notes, fmt.Sprintf("%d × %d MiB: built at %s MiB/s of payload (%s segments; peak RSS of the build %s MiB)", cr.Cell.Writers, cr.Cell.LogMiB,
			cr.f("build_mib_s"), fmt.Sprintf("%.0f", cr.m("segments")), cr.f("rss_build_mib")))
	}
	p("The builds, not timed as a figure of redokit: %s. The ratio of the peak RSS of the larger log to the smaller one is in the targets.", strings.Join(notes, "; "))
	if small, large := reads[0], reads[len(reads)-1]; large.Cell.LogMiB > small.Cell.LogMiB {
		// The targets compare whole-process peaks; the growth above the
		// start is what the read itself added, and says more of the reader.
		p(" Of the growth above the RSS at start (peak − start), %d × %d MiB ÷ %d × %d MiB is %.2f× raw and %.2f× decoded (medians).",
			large.Cell.Writers, large.Cell.LogMiB, small.Cell.Writers, small.Cell.LogMiB,
			large.m("read_raw_rss_grow_mib")/small.m("read_raw_rss_grow_mib"), large.m("read_rss_grow_mib")/small.m("read_rss_grow_mib"))
	}
	p("\n\n")
	for _, cr := range reads {
		if s, ok := cr.Metrics["rss_hwm_reset"]; ok && s.Min < 1 {
			p("**%d × %d MiB: VmHWM could not be reset in some repetitions** (/proc/self/clear_refs refused); there the peak RSS is the highest VmRSS sampled every 2 ms during the read, a lower bound of the true peak.\n\n", cr.Cell.Writers, cr.Cell.LogMiB)
		}
	}
}

// renderSortMerge is the table of redokit's decoded read beside the
// sort-then-merge baseline (a model of TiCDC's redo apply reader) on the
// same events, in the same child: on TiCDC-format files (the closer model)
// and on redokit's own segments and codec (a lower bound of the ratio).
func renderSortMerge(p func(string, ...any), reads []*CellReport) {
	p("### Against a sort-then-merge reader (TiCDC's redo apply, modelled)\n\n")
	p("The same events, read in the same child after redokit's reads by a model of TiCDC's `redo apply` reader: 16 workers each read a whole file, decode all of its events into memory, sort them (commit ts, start ts, delete < update < insert) and write them to a local sorted file; then a k-way heap merge of the sorted files decodes every event again (see Method). Two variants: on **TiCDC-format files** of the same events (converted before the clock starts through the model of TiCDC's lz4 file writer: msgp records in lz4 files of 64 MiB of frames, per writer; the sorted files are msgp too), the closer model and the target's; and on **redokit's codec** (redokit's segments, decoded with codec.Decoder, sorted files of codec bytes), a lower bound of the ratio since it decodes redokit's cheaper codec. Both are checked to yield redokit's events (count, commit-ts order, identity). Peak RSS as above (VmHWM reset before each read). × = redokit's decoded rows/s ÷ the baseline's, within each repetition.\n\n")
	p("| log | baseline | its files | redokit decoded rows/s | baseline rows/s | × | redokit peak RSS MiB | baseline peak RSS MiB | baseline peak − start MiB | its sort phase s / merge phase s | sorted files MiB |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	count := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.0f", v)
	}
	for _, cr := range reads {
		c := cr.Cell
		for _, v := range []struct{ name, pre, files string }{
			{"on TiCDC-format files", "ticdcmerge", fmt.Sprintf("%s files, %s MiB of msgp records, %s MiB lz4", count(cr.m("ticdc_files")), human(cr.m("ticdc_msgp_mib")), human(cr.m("ticdc_stored_mib")))},
			{"on redokit's codec", "sortmerge", fmt.Sprintf("%s segments, %s MiB", count(cr.m("segments")), human(cr.m("stored_mib")))},
		} {
			p("| %d × %d MiB%s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |\n", c.Writers, c.LogMiB, cr.errNote(), v.name, v.files,
				cr.f("read_rows_s"), cr.f(v.pre+"_rows_s"), cr.ratio("ratio_read_"+v.pre), cr.f("read_rss_mib"), cr.f(v.pre+"_rss_mib"),
				cr.f(v.pre+"_rss_grow_mib"), cr.f(v.pre+"_sort_s"), cr.f(v.pre+"_merge_s"), human(cr.m(v.pre+"_sorted_mib")))
		}
	}
	p("\n")
}
