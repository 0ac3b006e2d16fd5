package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redokit/redokit/testkit/bench"
)

// The side-by-side comparison of logs (go run ./benchmarks -peers): every
// log on every workload, at GOMAXPROCS 1 and 2, each repetition in a child
// process of its own, the rounds interleaved; medians, min–max spreads, and
// ratios to the raw append of the same round.

type peerWorkload struct {
	Name      string `json:"name"`
	Records   int    `json:"records"`
	SyncEvery int    `json:"sync_every,omitempty"`
	SyncBytes int64  `json:"sync_bytes,omitempty"`
	Cols      int    `json:"cols"`
	Desc      string `json:"desc"`
}

func peerWorkloads(quick bool) []peerWorkload {
	n, long := 1_000_000, 5_000_000
	if quick {
		n, long = 200_000, 1_000_000
	}
	return []peerWorkload{
		{Name: "W1", Records: n, SyncEvery: peerTxnRows, Cols: 1, Desc: "one sync per 1,000-record transaction"},
		{Name: "W2", Records: n, SyncBytes: peerSyncBytes, Cols: 1, Desc: "one sync every 64 MiB of payload (at the next transaction boundary)"},
		{Name: "W1-long", Records: long, SyncEvery: peerTxnRows, Cols: 1, Desc: "sustained: one sync per 1,000-record transaction"},
		{Name: "W1-10col", Records: n, SyncEvery: peerTxnRows, Cols: 10, Desc: "ten-column rows, one sync per 1,000-record transaction"},
		{Name: "W2-10col", Records: n, SyncBytes: peerSyncBytes, Cols: 10, Desc: "ten-column rows, one sync every 64 MiB of payload"},
	}
}

var peerProcs = []int{1, 2}

func peerCellID(wl, peer string, procs int) string {
	return fmt.Sprintf("peer/%s/%s/p%d", wl, peer, procs)
}

func buildPeerMatrix(quick bool, filter string) []Cell {
	var cells []Cell
	for _, w := range peerWorkloads(quick) {
		names := peerNames
		if w.Cols == 10 {
			names = peerNames10
		}
		for _, procs := range peerProcs {
			for _, p := range names {
				cells = append(cells, Cell{ID: peerCellID(w.Name, p, procs), Kind: "peer", Backend: "local-fsync",
					Peer: p, Workload: w.Name, RowSize: peerRowSize, Records: w.Records, SyncEvery: w.SyncEvery,
					SyncBytes: w.SyncBytes, Cols: w.Cols, Procs: procs})
			}
		}
	}
	if filter == "" {
		return cells
	}
	var kept []Cell
	for _, c := range cells {
		for _, f := range strings.Split(filter, ",") {
			if strings.Contains(c.ID, f) {
				kept = append(kept, c)
				break
			}
		}
	}
	// A ratio needs its raw append: keep it beside any cell kept.
	need := map[string]bool{}
	for _, c := range kept {
		need[peerCellID(c.Workload, "raw-append", c.Procs)] = true
	}
	var out []Cell
	for _, c := range cells {
		keep := need[c.ID]
		for _, k := range kept {
			keep = keep || k.ID == c.ID
		}
		if keep {
			out = append(out, c)
		}
	}
	return out
}

// PeerReport is what a -peers run measured; results.json holds it whole.
type PeerReport struct {
	Tool      string            `json:"tool"`
	Machine   Machine           `json:"machine"`
	Quick     bool              `json:"quick"`
	Reps      int               `json:"repetitions"`
	Seconds   float64           `json:"run_seconds"`
	Workloads []peerWorkload    `json:"workloads"`
	Cells     []CellReport      `json:"cells"`
	Checks    []string          `json:"checks"`
	Peers     map[string]string `json:"peer_descriptions"`
}

func runPeers(quick bool, out string, reps int, dir, filter string) error {
	ctx := context.Background()
	start := time.Now()
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mach := readMachine(absDir)
	cells := buildPeerMatrix(quick, filter)
	fmt.Fprintf(os.Stderr, "peer comparison: %d cells × %d rounds, interleaved, in %s\n", len(cells), reps, absDir)
	results := runRounds(cells, reps, start, func(c Cell, rep int) (*Result, string) {
		r := runChild(ctx, childInput{Cell: c, Dir: absDir, Rep: rep, Quick: quick}, os.Stderr)
		return r, fmt.Sprintf("%-40s %5.1fs %s", c.ID, r.Wall, peerHeadline(r))
	})
	pairPeerRounds(cells, results)
	mach.LoadEnd = loadavg()
	r := &PeerReport{Tool: "github.com/redokit/redokit/benchmarks -peers", Machine: mach, Quick: quick, Reps: reps,
		Seconds: time.Since(start).Seconds(), Workloads: peerWorkloads(quick), Peers: peerDesc}
	for _, c := range cells {
		r.Cells = append(r.Cells, summarizeCell(c, results[c.ID]))
	}
	r.Checks = peerChecks(r)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), js, 0o644); err != nil {
		return err
	}
	md := renderPeers(r)
	if err := os.WriteFile(filepath.Join(out, "peers.md"), []byte(md), 0o644); err != nil {
		return err
	}
	io.WriteString(os.Stdout, md)
	fmt.Fprintf(os.Stderr, "peer comparison written to %s (%.0f s)\n", out, time.Since(start).Seconds())
	return nil
}

func peerHeadline(r *Result) string {
	if r.Err != "" {
		return "ERROR: " + r.Err
	}
	m := r.Metrics
	s := fmt.Sprintf("%.1f MiB/s, CPU %.2f s (%.2f s/GiB), %d syncs, GOMAXPROCS %d", m["mib_s"], m["cpu_s"], m["cpu_s_per_gib"], int(m["syncs"]), int(m["gomaxprocs"]))
	if v, ok := m["lz4c_1core_mib_s"]; ok {
		s += fmt.Sprintf(", lz4 1 core %.0f MiB/s", v)
	}
	return s
}

// pairPeerRounds adds to every repetition its ratio to the raw append of
// the same workload, GOMAXPROCS and round, and for the lz4 logs the ratio
// to the lz4-on target 0.8 × min(raw append, GOMAXPROCS × one core's lz4).
func pairPeerRounds(cells []Cell, results map[string][]*Result) {
	for _, c := range cells {
		raws := results[peerCellID(c.Workload, "raw-append", c.Procs)]
		for i, r := range results[c.ID] {
			if r.Err != "" || i >= len(raws) || raws[i].Err != "" {
				continue
			}
			raw := raws[i].Metrics
			r.Metrics["ratio_raw"] = r.Metrics["mib_s"] / raw["mib_s"]
			target := 0.8 * min(raw["mib_s"], float64(c.Procs)*raw["lz4c_1core_mib_s"])
			if c.Peer == "raw-append" {
				r.Metrics["lz4_target_mib_s"] = target
			}
			if strings.HasSuffix(c.Peer, "lz4") {
				r.Metrics["ratio_lz4_target"] = r.Metrics["mib_s"] / target
			}
		}
	}
}

// summarizeCell folds a cell's repetitions into medians and spreads (the
// main report and the peer report alike); a failed repetition counts only
// its error.
func summarizeCell(c Cell, results []*Result) CellReport {
	cr := CellReport{Cell: c, Metrics: map[string]bench.Summary{}}
	vals := map[string][]float64{}
	for _, res := range results {
		cr.Wall = append(cr.Wall, bench.Sig(res.Wall))
		if res.Err != "" {
			cr.Errors = append(cr.Errors, res.Err)
			continue
		}
		for k, v := range res.Metrics {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				vals[k] = append(vals[k], v)
			}
		}
	}
	for k, v := range vals {
		s := bench.Summarize(v)
		if k != "payload_crc32c" && k != "payload_bytes" && k != "received_bytes" {
			s = s.Rounded() // exact values stay exact
		}
		cr.Metrics[k] = s
	}
	return cr
}

// peerChecks verifies that every log of a workload took the same bytes, in
// every round, and that the cadence of syncs was the same.
func peerChecks(r *PeerReport) []string {
	var out []string
	for _, w := range r.Workloads {
		var payload, crc, syncs float64 = -1, -1, -1
		ok, n := true, 0
		var bad []string
		for _, cr := range r.Cells {
			if cr.Cell.Workload != w.Name {
				continue
			}
			n++
			for _, k := range []string{"payload_bytes", "payload_crc32c", "received_bytes", "syncs"} {
				s, has := cr.Metrics[k]
				if !has {
					continue
				}
				// Every cell of the workload must agree with the first
				// value seen, except the TiCDC model's received bytes (it
				// takes the rows and encodes them with msgp: its bytes are
				// its own).
				same := func(first *float64, v float64, what string) {
					if *first < 0 {
						*first = v
					}
					if v != *first {
						ok = false
						bad = append(bad, fmt.Sprintf("%s %s", cr.Cell.ID, what))
					}
				}
				for _, v := range s.Samples {
					switch k {
					case "payload_bytes":
						same(&payload, v, fmt.Sprintf("payload %.0f", v))
					case "payload_crc32c":
						same(&crc, v, fmt.Sprintf("CRC32C %08x", uint32(v)))
					case "received_bytes":
						if !strings.HasPrefix(cr.Cell.Peer, "ticdc") && v != payload {
							ok = false
							bad = append(bad, fmt.Sprintf("%s received %.0f", cr.Cell.ID, v))
						}
					case "syncs":
						same(&syncs, v, fmt.Sprintf("%.0f syncs", v))
					}
				}
			}
		}
		if n == 0 {
			continue
		}
		verdict := "equal for every log and round"
		if !ok {
			verdict = "**MISMATCH**: " + strings.Join(bad, "; ")
		}
		what := "bytes received (redokit: durable payload from Writer.Stats; the others: bytes handed over)"
		if w.Cols == 10 {
			what += "; the TiCDC model takes the same rows and encodes them itself (msgp), so its own bytes differ and are shown in its table"
		}
		out = append(out, fmt.Sprintf("%s: payload %.0f bytes (%.1f MiB), CRC32C %08x, %.0f syncs; %s: %s", w.Name, payload, payload/mib, uint32(crc), syncs, what, verdict))
	}
	return out
}

func renderPeers(r *PeerReport) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	q := ""
	if r.Quick {
		q = " -quick"
	}
	p("# Logs side by side\n\n")
	p("Run of %s, generated by `go run ./benchmarks -peers%s` (%d rounds, %.0f s in all; see benchmarks/README.md). ", r.Machine.Date, q, r.Reps, r.Seconds)
	p("Machine: %s, %d cores, %.1f GiB, %s, %s; disk %s (%s %s); load average %s → %s. **A shared, noisy machine**: read every figure with its spread.\n\n",
		r.Machine.CPU, r.Machine.Cores, r.Machine.MemGiB, r.Machine.Kernel, r.Machine.Go, r.Machine.Dir, r.Machine.FS, r.Machine.DiskRotational, r.Machine.LoadStart, r.Machine.LoadEnd)
	p("Every cell is one log on one workload at one GOMAXPROCS (set in the child's environment), run once per round in a child process of its own, in a fresh directory on the same file system; the rounds are interleaved (each runs every cell once, in a rotated order). ")
	p("Records are 512 B row events (codec encoding), in transactions of %d records (one commit ts, one of %d tables in turn). ", peerTxnRows, peerSpans)
	p("The clock runs from the first append to the return of the log's close (its final sync included); the input is made before it starts, and written once through write(2) to a synced, deleted file before the log opens (the kernel's first read of a freshly written buffer costs several times a later one here, and the raw append, which writes straight from the input, would pay it inside its clock). ")
	p("MiB/s = payload (the records' codec encoding) ÷ that time; × raw = that ÷ the raw append of the same workload, GOMAXPROCS and round, then the median and min–max of those ratios; CPU = user + sys time of the child (getrusage) over the same span, and per GiB of payload. Figures are medians with (min–max); **noisy** when the range passes 20%% of the median.\n\n")

	p("## Checks\n\n")
	for _, c := range r.Checks {
		p("- %s\n", c)
	}
	p("\n")

	for _, w := range r.Workloads {
		var cells []*CellReport
		for i := range r.Cells {
			if r.Cells[i].Cell.Workload == w.Name {
				cells = append(cells, &r.Cells[i])
			}
		}
		if len(cells) == 0 {
			continue
		}
		p("## %s: %s records, %s\n\n", w.Name, human(float64(w.Records)), w.Desc)
		if w.Cols == 10 {
			p("Rows of ten columns (two ints, two varchars, a decimal, a double, a datetime, an enum, a 20-byte hash, a BLOB of words bringing the codec encoding to about 512 B). raw-append appends the rows' codec encoding; redokit's writer gets the rows (Write) and encodes them; the TiCDC model gets the same rows in TiCDC's RedoLog shape and msgp-encodes them. MiB/s is of the codec payload for all, so that the rows/s compare.\n\n")
		} else {
			p("Rows of an id and one BLOB column of words (about 512 B encoded). Every log gets the very same encoded records.\n\n")
		}
		p("| log | GOMAXPROCS | MiB/s | × raw (paired) | rows/s | CPU s/GiB | CPU s | minor faults/MiB | on disk MiB (payload ÷ disk) | sync interval p50 / p99 ms | peak RSS MiB (above idle) |")
		if w.Cols == 10 {
			p(" own bytes/row |")
		}
		p("\n|---|---|---|---|---|---|---|---|---|---|---|")
		if w.Cols == 10 {
			p("---|")
		}
		p("\n")
		for _, cr := range cells {
			p("| %s%s | %d | %s | %s | %s | %s | %s | %s | %s (%.2f×) | %s / %s | %s (%s) |", cr.Cell.Peer, cr.errNote(), cr.Cell.Procs, cr.f("mib_s"), cr.ratio("ratio_raw"),
				human(cr.m("rows_s")), cr.f("cpu_s_per_gib"), human(cr.m("cpu_s")), human(cr.m("minor_faults_per_mib")), human(cr.m("disk_mib")), cr.m("disk_ratio"),
				human(cr.m("batch_p50_ms")), human(cr.m("batch_p99_ms")), human(cr.m("rss_mib")), cr.f("rss_grow_mib"))
			if w.Cols == 10 {
				own := cr.m("payload_bytes") / float64(w.Records)
				if v, ok := cr.Metrics["msgp_bytes_per_row"]; ok {
					own = v.Median
				}
				p(" %.0f |", own)
			}
			p("\n")
		}
		p("\n")
		// The lz4-on target, per GOMAXPROCS.
		for _, procs := range peerProcs {
			var raw *CellReport
			for _, cr := range cells {
				if cr.Cell.Peer == "raw-append" && cr.Cell.Procs == procs {
					raw = cr
				}
			}
			if raw == nil {
				continue
			}
			p("- GOMAXPROCS %d: one core's lz4 (pierrec/lz4/v4 block compression of the same payload, 256 KiB blocks, one goroutine) %s MiB/s (ratio %.2f); lz4-on target 0.8 × min(raw append, %d × lz4) = %s MiB/s.",
				procs, raw.f("lz4c_1core_mib_s"), raw.m("lz4_ratio"), procs, raw.f("lz4_target_mib_s"))
			for _, cr := range cells {
				if cr.Cell.Procs != procs || !strings.HasSuffix(cr.Cell.Peer, "lz4") {
					continue
				}
				verdict := "not measured"
				if s, ok := cr.Metrics["ratio_lz4_target"]; ok {
					verdict = "**not met**"
					if s.Median >= 1 {
						verdict = "**met**"
					}
					if s.Min < 1 && s.Max >= 1 {
						verdict += " (the spread crosses the line)"
					}
				}
				p(" %s: %s of the target, %s.", cr.Cell.Peer, cr.ratio("ratio_lz4_target"), verdict)
			}
			p("\n")
		}
		p("\n")
	}

	p("## What each log does\n\n| log | per transaction / per sync point |\n|---|---|\n")
	seen := map[string]bool{}
	for _, n := range append(append([]string{}, peerNames...), peerNames10...) {
		if !seen[n] {
			seen[n] = true
			p("| %s | %s |\n", n, peerDesc[n])
		}
	}
	var failed []string
	for _, cr := range r.Cells {
		for _, e := range cr.Errors {
			failed = append(failed, fmt.Sprintf("- %s: %s", cr.Cell.ID, firstLine(e)))
		}
	}
	if len(failed) > 0 {
		p("\n## Failed repetitions\n\n%s\n", strings.Join(failed, "\n"))
	}
	return b.String()
}
