// Command benchmarks measures redokit's writer, reader, apply and sink gate
// on every backend it can reach, beside baselines measured in the same run,
// and writes a report (Markdown, JSON, SVG charts).
//
//	go run ./benchmarks -quick                  # from the repository root
//	go run ./benchmarks -out /tmp/bench         # the full matrix
//	go run ./benchmarks -storage 's3://b/p?…'   # add a store of your own
//	go run ./benchmarks -peers -quick           # only the logs side by side
//
// Start the local S3, GCS and Azure servers first to include them
// (source scripts/emulators.sh && emulators_start s3 gcs azure); without them
// those backends are listed as not available, with the reason.
//
// Every repetition of every cell runs in a child process of this binary, so
// that each has its own peak RSS; repetitions are interleaved (each round runs
// every cell once, in a rotated order), and every figure is reported as the
// median with its min–max spread.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var (
		child    = flag.Bool("child", false, "internal: run one cell repetition (input on stdin)")
		quick    = flag.Bool("quick", false, "a small matrix that answers every target in a few minutes")
		out      = flag.String("out", "", "output folder (default benchmarks/results/latest)")
		reps     = flag.Int("reps", 3, "repetitions of every cell (at least 3 for a spread)")
		dir      = flag.String("dir", os.TempDir(), "folder on the disk the local backends and WAL libraries write to")
		filter   = flag.String("cells", "", "keep only cells whose ID contains one of these comma-separated strings")
		render   = flag.String("render", "", "re-render the report, charts and snippet from a results.json (into -out, default its folder)")
		peers    = flag.Bool("peers", false, "run only the side-by-side comparison of logs (workloads W1, W2, W1-long and the ten-column variant, GOMAXPROCS 1 and 2); output in benchmarks/results/peers by default")
		storages stringList
	)
	flag.Var(&storages, "storage", "a blob URL to benchmark as well (repeatable); the bucket must exist")
	flag.Parse()
	if *child {
		os.Exit(childMain())
	}
	if *render != "" {
		if *out == "" {
			*out = filepath.Dir(*render)
		}
		if err := rerender(*render, *out); err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks:", err)
			os.Exit(1)
		}
		return
	}
	if *reps < 1 {
		*reps = 1
	}
	if *peers {
		if *out == "" {
			*out = filepath.Join(filepath.Dir(defaultOut()), "peers")
		}
		if err := runPeers(*quick, *out, *reps, *dir, *filter); err != nil {
			fmt.Fprintln(os.Stderr, "benchmarks:", err)
			os.Exit(1)
		}
		return
	}
	if *out == "" {
		*out = defaultOut()
	}
	if err := run(*quick, *out, *reps, *dir, *filter, storages); err != nil {
		fmt.Fprintln(os.Stderr, "benchmarks:", err)
		os.Exit(1)
	}
}

// defaultOut is benchmarks/results/latest of this module, whether the
// command runs from the repository root or from benchmarks/.
func defaultOut() string {
	if _, err := os.Stat(filepath.Join("benchmarks", "go.mod")); err == nil {
		return filepath.Join("benchmarks", "results", "latest")
	}
	return filepath.Join("results", "latest")
}

func run(quick bool, out string, reps int, dir, filter string, storages []string) error {
	ctx := context.Background()
	start := time.Now()
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mach := readMachine(absDir)
	backends := discoverBackends(ctx, storages)
	defer func() {
		for _, be := range backends {
			if be.cleanup != nil {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				if err := be.cleanup(cctx); err != nil {
					fmt.Fprintf(os.Stderr, "cleanup %s: %v\n", be.Name, err)
				}
				cancel()
			}
		}
	}()
	byName := map[string]*Backend{}
	for _, be := range backends {
		byName[be.Name] = be
		if be.Available {
			fmt.Fprintf(os.Stderr, "backend %-13s available   %s\n", be.Name, be.Desc)
		} else {
			fmt.Fprintf(os.Stderr, "backend %-13s NOT available: %s\n", be.Name, be.Reason)
		}
	}
	cells := buildMatrix(matrixOpts{quick: quick, backends: backends, filter: filter})
	fmt.Fprintf(os.Stderr, "%d cells × %d repetitions, interleaved\n", len(cells), reps)

	results := runRounds(cells, reps, start, func(c Cell, rep int) (*Result, string) {
		r := runChild(ctx, childInput{Cell: c, Backend: byName[c.Backend], Dir: absDir, Rep: rep, Quick: quick}, os.Stderr)
		return r, fmt.Sprintf("%-58s %5.1fs %s", c.ID, r.Wall, headline(c, r))
	})
	mach.LoadEnd = loadavg()
	rep := buildReport(mach, backends, cells, results, quick, reps, time.Since(start))
	if err := writeReport(out, rep); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "report written to %s (%.0f s)\n", out, time.Since(start).Seconds())
	return nil
}

// runRounds runs every cell once per round, reps rounds, in an order rotated
// each round so that no cell always runs first or right after the same
// neighbour, printing a progress line (run returns the result and the
// line's text). It returns each cell's results by ID, in round order.
func runRounds(cells []Cell, reps int, start time.Time, run func(c Cell, rep int) (*Result, string)) map[string][]*Result {
	results := make(map[string][]*Result, len(cells))
	for rep := range reps {
		off := 0
		if len(cells) > 0 {
			off = (rep * (len(cells)/reps + 1)) % len(cells)
		}
		for i := range cells {
			c := cells[(i+off)%len(cells)]
			r, line := run(c, rep)
			results[c.ID] = append(results[c.ID], r)
			fmt.Fprintf(os.Stderr, "[%d/%d %4.0fs] %s\n", rep+1, reps, time.Since(start).Seconds(), line)
		}
	}
	return results
}

// rerender writes the report of a results.json again.
func rerender(path, out string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeReport(out, &r)
}

// headline is the progress line's figure.
func headline(c Cell, r *Result) string {
	if r.Err != "" {
		return "ERROR: " + r.Err
	}
	m := r.Metrics
	switch c.Kind {
	case "writer":
		return fmt.Sprintf("%.0f rows/s %.1f MiB/s, flush p50 %.1f ms, read %.0f rows/s, ×raw %.2f",
			m["write_rows_s"], m["write_mib_s"], m["flush_p50_ms"], m["read_rows_s"], m["ratio_raw"])
	case "read":
		return fmt.Sprintf("built %.0f MiB at %.0f MiB/s; raw %.0f rows/s %.0f MiB RSS, decoded %.0f rows/s %.0f MiB RSS; sort-then-merge on TiCDC files %.0f rows/s %.0f MiB RSS (decoded ×%.1f), on redokit's codec %.0f rows/s %.0f MiB RSS (×%.1f); ceiling %.0f rows/s",
			m["payload_mib"], m["build_mib_s"], m["read_raw_rows_s"], m["read_raw_rss_mib"], m["read_rows_s"], m["read_rss_mib"],
			m["ticdcmerge_rows_s"], m["ticdcmerge_rss_mib"], m["ratio_read_ticdcmerge"],
			m["sortmerge_rows_s"], m["sortmerge_rss_mib"], m["ratio_read_sortmerge"], m["ceiling_rows_s"])
	case "peer":
		return fmt.Sprintf("%.0f rows/s %.1f MiB/s", m["rows_s"], m["mib_s"])
	case "pipeline":
		return fmt.Sprintf("%.0f rows/s, e2e p50 %.1f ms p99 %.1f ms", m["pipe_rows_s"], m["e2e_p50_ms"], m["e2e_p99_ms"])
	case "apply":
		if _, ok := m["bulk_rows_s"]; ok {
			return fmt.Sprintf("apply %.0f rows/s, bulk %.0f rows/s", m["apply_rows_s"], m["bulk_rows_s"])
		}
		return fmt.Sprintf("apply %.0f rows/s, naive %.0f rows/s", m["apply_rows_s"], m["naive_rows_s"])
	}
	return ""
}
