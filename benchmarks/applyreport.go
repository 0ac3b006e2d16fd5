package main

import (
	"fmt"
	"strings"
)

// applyNeed is issue 15's throughput target: `redokit apply` at least 5×
// a naive per-row replay, on each sink.
const applyNeed = 5.0

// applyInfo keeps on an apply cell's report why its sink was unavailable,
// or what the last measured repetition recorded of the sink.
func applyInfo(cr *CellReport, results []*Result) {
	for _, res := range results {
		if res.Err != "" {
			continue
		}
		if why := res.Info[applyUnavailable]; why != "" {
			cr.Unavailable = why
			continue
		}
		if len(res.Info) > 0 {
			cr.Info = res.Info
		}
	}
	if cr.Info != nil {
		cr.Unavailable = "" // measured in some repetition
	}
}

// applySettings says how the sink commits.
func applySettings(cr *CellReport) string {
	switch cr.Cell.Sink {
	case applySQLite:
		return "SQLite, WAL, synchronous=NORMAL (the sink's defaults)"
	case applyMariaDB:
		s := "MariaDB"
		if v := cr.Info["server"]; v != "" {
			s += " " + v
		}
		if v := cr.Info["innodb_flush_log_at_trx_commit"]; v != "" {
			s += ", innodb_flush_log_at_trx_commit=" + v
		} else {
			s += ", innodb_flush_log_at_trx_commit=1"
		}
		if cr.Info["log_bin"] == "true" {
			s += ", sync_binlog=" + cr.Info["sync_binlog"]
		} else if cr.Info["log_bin"] != "" {
			s += ", binary log off"
		}
		return s
	}
	return cr.Cell.Sink
}

func applyGoal(cr *CellReport) string {
	return fmt.Sprintf("redokit apply ≥ 5× a naive per-row replay (gen log of %s row changes; %s)", human(float64(cr.Cell.Rows)), applySettings(cr))
}

// applyNote says over how many row changes the naive rate was taken.
func applyNote(cr *CellReport) string {
	n, ok := cr.Metrics["naive_rows"]
	if !ok {
		return ""
	}
	if int(n.Median) < cr.Cell.Rows {
		return fmt.Sprintf("naive rate over the log's first %s row changes (apply: all %s)", human(n.Median), human(float64(cr.Cell.Rows)))
	}
	return ""
}

// renderApply is the report's section on apply: each sink's apply.Run beside
// its naive replay, in the same child.
func renderApply(p func(string, ...any), r *Report) {
	p("## Apply against a naive replay\n\n")
	ap := r.cell(func(c Cell) bool { return c.Kind == "apply" })
	if len(ap) == 0 {
		p("Not run.\n\n")
		return
	}
	c0 := ap[0].Cell
	p("The log `redokit gen --rows %d` writes with every other flag at its default (testkit/workload: 4 tables at the start, the first split into 3 spans, 200 B text, transactions of up to 8 row changes — inserts, updates, deletes — and 0.5%% DDLs: CREATE, ADD COLUMN, TRUNCATE, DROP TABLE; seed 1), written before the clock starts through one redo writer on local disk. "+
		"**apply** = `redokit apply`'s path: reader.Open over the whole log and apply.Run with its default options into a fresh downstream, timed from reader.Open to Run's return; the downstream is then checked to hold as many rows as the upstream. "+
		"**naive** = the same log read again from the start into another fresh downstream of the same sink and settings: one statement per row change in autocommit on one connection (INSERT … ON CONFLICT DO UPDATE or INSERT … ON DUPLICATE KEY UPDATE of the new image, DELETE by key), values bound as the sink binds them, SQLite statements kept prepared, each DDL through the sink's ApplyDDL; `TestNaiveMatchesApply` checks that it leaves apply.Run's rows. "+
		"Where the naive replay covers fewer row changes than the log (a durable commit per row is slow), it runs on the log's first rows — the ones apply starts with — and its rate is rows/s over that prefix. "+
		"MariaDB: the cell sets innodb_flush_log_at_trx_commit=1 (and sync_binlog=1 when the binary log is on) before it measures, records the value it measured with, and restores the old one after; each repetition uses fresh databases, dropped after. "+
		"CPU s = user + sys of the child (getrusage) over each replay: it includes SQLite (in the process) but not the MariaDB server. Ratio = apply rows/s ÷ naive rows/s within each repetition.\n\n", c0.Rows)
	p("| sink | settings | log row changes (DDLs) | apply rows/s | apply CPU s | naive row changes | naive rows/s | naive CPU s | apply ÷ naive | target | verdict | peak RSS MiB | GOMAXPROCS |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, cr := range ap {
		verdict := r.verdict(cr.Cell.ID)
		if cr.Unavailable != "" {
			p("| %s | not available: %s | | | | | | | | ≥ 5× | %s | | |\n", cr.Cell.Sink, cr.Unavailable, verdict)
			continue
		}
		p("| %s%s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | ≥ 5× | **%s** | %s | %s |\n", cr.Cell.Sink, cr.errNote(), applySettings(cr),
			human(cr.m("log_rows")), human(cr.m("log_ddls")), cr.f("apply_rows_s"), cr.f("apply_cpu_s"), human(cr.m("naive_rows")),
			cr.f("naive_rows_s"), cr.f("naive_cpu_s"), cr.ratio("ratio_apply_naive"), verdict, cr.f("rss_mib"), human(cr.m("gomaxprocs")))
	}
	p("\n")
}

// renderApplySnippet is the README's apply table: both sinks, the naive
// baselines beside them, the target and whether it is met.
func renderApplySnippet(p func(string, ...any), r *Report) {
	ap := r.cell(func(c Cell) bool { return c.Kind == "apply" })
	if len(ap) == 0 {
		return
	}
	p("\n| `redokit apply` (gen log of %s row changes) | apply rows/s | naive per-row replay rows/s | apply ÷ naive | target | verdict |\n|---|---|---|---|---|---|\n", human(float64(ap[0].Cell.Rows)))
	for _, cr := range ap {
		verdict := r.verdict(cr.Cell.ID)
		if cr.Unavailable != "" {
			p("| %s | – | – | – | ≥ 5× | not available: %s |\n", cr.Cell.Sink, cr.Unavailable)
			continue
		}
		naive := human(cr.m("naive_rows_s"))
		if n := cr.m("naive_rows"); n < float64(cr.Cell.Rows) {
			naive += fmt.Sprintf(" (first %s rows)", human(n))
		}
		meas := "–"
		if s, ok := cr.Metrics["ratio_apply_naive"]; ok {
			meas = fmt.Sprintf("%.1f× (%.1f–%.1f)", s.Median, s.Min, s.Max)
		}
		p("| %s | %s | %s | %s | ≥ 5× | %s |\n", strings.TrimSuffix(applySettings(cr), " (the sink's defaults)"), human(cr.m("apply_rows_s")), naive, meas, verdict)
	}
}
