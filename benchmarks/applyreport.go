package main

import (
	"fmt"
	"strings"
)

// applyNeed is issue 15's throughput target: `redokit apply` at least 5×
// a naive per-row replay, on each sink; applyNeedDurable is issue 27's, at
// least 20× when both commit durably; applyNeedBulk is issue 27's against
// the database's own bulk load of the same rows.
const (
	applyNeed        = 5.0
	applyNeedDurable = 20.0
	applyNeedBulk    = 0.5
)

// applyDurable reports whether a cell's commits are durable: MariaDB and
// PostgreSQL as the cell sets them, SQLite with synchronous=FULL.
func applyDurable(c Cell) bool { return c.Sink != applySQLite || c.Sync == "full" }

// applyNeedOf is the target of a mixed cell against its naive replay.
func applyNeedOf(c Cell) float64 {
	if applyDurable(c) {
		return applyNeedDurable
	}
	return applyNeed
}

// bulkPath names the sink's bulk load.
func bulkPath(sink string) string {
	switch sink {
	case applyMariaDB:
		return "LOAD DATA LOCAL INFILE"
	case applyPostgres:
		return "COPY FROM STDIN"
	}
	return "prepared INSERTs in one transaction"
}

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
		if cr.Cell.Sync == "full" {
			return "SQLite, WAL, synchronous=FULL"
		}
		return "SQLite, WAL, synchronous=NORMAL (the sink's defaults)"
	case applyPostgres:
		s := "PostgreSQL"
		if v := cr.Info["server"]; v != "" {
			s = v
		}
		for _, k := range []string{"fsync", "synchronous_commit", "wal_sync_method"} {
			if v := cr.Info[k]; v != "" {
				s += ", " + k + "=" + v
			}
		}
		return s
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
	if cr.Cell.Mix == applyInsert {
		return fmt.Sprintf("redokit apply ≥ 0.5× the database's bulk load (%s) of the same rows (inserts of a gen workload of %s row changes; %s)",
			bulkPath(cr.Cell.Sink), human(float64(cr.Cell.Rows)), applySettings(cr))
	}
	durable := ""
	if applyDurable(cr.Cell) {
		durable = " with durable commits"
	}
	return fmt.Sprintf("redokit apply ≥ %g× a naive per-row replay%s (%s of %s row changes; %s)",
		applyNeedOf(cr.Cell), durable, applyLogName(cr.Cell), human(float64(cr.Cell.Rows)), applySettings(cr))
}

// applyLogName names a mixed cell's log by its DDL rate.
func applyLogName(c Cell) string {
	if c.Mix == applyRareDDL {
		return "gen log with rare DDLs (1 per ~20k)"
	}
	return "DDL-heavy gen log (1 DDL per ~870)"
}

// naiveRows is how many row changes the naive replay applied, in both
// windows where it ran two.
func naiveRows(cr *CellReport) float64 {
	n := cr.m("naive_rows")
	if m, ok := cr.Metrics["naive_mid_rows"]; ok {
		n += m.Median
	}
	return n
}

// applyNote says over how many row changes the naive rate was taken.
func applyNote(cr *CellReport) string {
	n, ok := cr.Metrics["naive_rows"]
	if !ok {
		return ""
	}
	if int(n.Median) >= cr.Cell.Rows {
		return ""
	}
	if m, ok := cr.Metrics["naive_mid_rows"]; ok {
		return fmt.Sprintf("naive rate over %s row changes from the log's start and %s from its middle (apply: all %s)",
			human(n.Median), human(m.Median), human(float64(cr.Cell.Rows)))
	}
	return fmt.Sprintf("naive rate over the log's first %s row changes (apply: all %s)", human(n.Median), human(float64(cr.Cell.Rows)))
}

// renderApply is the report's section on apply: each sink's apply.Run beside
// its naive replay, and beside its bulk load, in the same child.
func renderApply(p func(string, ...any), r *Report) {
	p("## Apply against a naive replay and against bulk load\n\n")
	mixed := r.cell(func(c Cell) bool { return c.Kind == "apply" && c.Mix != applyInsert })
	inserts := r.cell(func(c Cell) bool { return c.Kind == "apply" && c.Mix == applyInsert })
	if len(mixed) == 0 && len(inserts) == 0 {
		p("Not run.\n\n")
		return
	}
	durability := "Durable settings, the same on both sides of every ratio (the baseline runs in another fresh downstream of the same sink, server and settings): MariaDB: the cell sets innodb_flush_log_at_trx_commit=1 (and sync_binlog=1 when the binary log is on) before it measures, records the value it measured with, and restores the old one after. PostgreSQL: fsync and synchronous_commit on (the cell turns either on with ALTER SYSTEM and a reload when it is off, and restores it after), wal_sync_method as the server has it. SQLite: the sink's WAL, with synchronous=NORMAL (its default: a commit is not synced, so not durable) or, in the `-full` cell, synchronous=FULL (the WAL synced at each commit). Each repetition uses fresh databases, schemas or files, dropped after. Before each timed replay or load the child collects its garbage (runtime.GC: the log it wrote leaves none for the timed run to trace, as in a fresh `redokit apply`) and, on PostgreSQL, runs CHECKPOINT, so that neither side pays for a checkpoint of the other's writes (both untimed). "
	if len(mixed) > 0 {
		c0 := mixed[0].Cell
		p("### Mixed log against a naive replay\n\n")
		p("The log `redokit gen --rows %d` writes with every other flag at its default (testkit/workload: 4 tables at the start, the first split into 3 spans, 200 B text, transactions of up to 8 row changes — inserts, updates, deletes — and 0.5%% DDLs: CREATE, ADD COLUMN, TRUNCATE, DROP TABLE; seed 1), written before the clock starts through one redo writer on local disk: a DDL every ~870 row changes, far more than a CDC stream carries (the DDL-heavy cells, apply/<sink>). The rare-ddl cells (apply/rare-ddl/<sink>) write the same workload with DDLs in 1 of 4,600 transactions instead, one per ~20,000 row changes (benchmarks/README.md says why). "+
			"**apply** = `redokit apply`'s path: reader.Open over the whole log and apply.Run with its default options into a fresh downstream, timed from reader.Open to Run's return; the downstream is then checked to hold as many rows as the upstream. "+
			"**naive** = the same log read again from the start into another fresh downstream of the same sink and settings: one statement per row change in autocommit on one connection (INSERT … ON CONFLICT DO UPDATE or INSERT … ON DUPLICATE KEY UPDATE of the new image, DELETE by key), values bound as the sink binds them, SQLite statements kept prepared, PostgreSQL's prepared by pgx once per text, each DDL through the sink's ApplyDDL; `TestNaiveMatchesApply` (and its MariaDB and PostgreSQL variants) checks that it leaves apply.Run's rows. "+
			"Where the naive replay covers fewer row changes than the log (a durable commit per row is slow), it runs on two windows of that many rows each: the log's first rows, into small tables, and the rows after the commit ts by which half the log's rows are written, into a downstream that apply.Run brought to that point first (untimed), whose tables are as large as apply's are on average over the whole log; its rate is the rows of both windows over their time. (Until 2026-12-06 the first window alone was measured, which at full size set apply over tables growing to hundreds of thousands of rows against a loop into small ones.) "+
			durability+
			"CPU s = user + sys of the child (getrusage) over each replay: it includes SQLite (in the process) but not the MariaDB or PostgreSQL server. Ratio = apply rows/s ÷ naive rows/s within each repetition. Target: ≥ 5× (issue 15) with SQLite's default, ≥ 20× (issue 27) where commits are durable.\n\n", c0.Rows)
		p("| cell | settings | log row changes (DDLs) | apply rows/s | apply CPU s | naive row changes | naive rows/s | naive CPU s | apply ÷ naive | target | verdict | peak RSS MiB | GOMAXPROCS |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, cr := range mixed {
			verdict := r.verdict(cr.Cell.ID)
			need := fmt.Sprintf("≥ %g×", applyNeedOf(cr.Cell))
			if cr.Unavailable != "" {
				p("| %s | not available: %s | | | | | | | | %s | %s | | |\n", cr.Cell.ID, cr.Unavailable, need, verdict)
				continue
			}
			p("| %s%s | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s | **%s** | %s | %s |\n", cr.Cell.ID, cr.errNote(), applySettings(cr),
				human(cr.m("log_rows")), human(cr.m("log_ddls")), cr.f("apply_rows_s"), cr.f("apply_cpu_s"), human(naiveRows(cr)),
				cr.f("naive_rows_s"), cr.f("naive_cpu_s"), cr.ratio("ratio_apply_naive"), need, verdict, cr.f("rss_mib"), human(cr.m("gomaxprocs")))
		}
		p("\n")
		p("Where the time goes, in seconds (medians, min–max). apply: **at barriers** = apply.Run waiting, before each DDL, for the workers to apply the rows held and commit (Result.BarrierTime); **in DDLs** = in the sink's ApplyDDL, its progress row included (Result.DDLTime); **rest** = everything else (reading and decoding the log, and the rows the workers apply and commit between DDLs). naive: **in DDLs** = its DDLs through the same ApplyDDL with no progress row; the rest is its per-row statements and commits. The DDLs' own server work is paid by both sides; what apply adds at a DDL is its barrier.\n\n")
		p("| cell | sink | log row changes (DDLs) | apply s | at barriers | in DDLs | rest | naive row changes (DDLs) | naive s | naive in DDLs |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, cr := range mixed {
			if cr.Unavailable != "" {
				continue
			}
			p("| %s | %s | %s (%s) | %s | %s | %s | %s | %s (%s) | %s | %s |\n", cr.Cell.ID, cr.Cell.Sink,
				human(cr.m("log_rows")), human(cr.m("log_ddls")), cr.f("apply_s"), cr.f("apply_barrier_s"), cr.f("apply_ddl_s"), cr.f("apply_other_s"),
				human(naiveRows(cr)), human(cr.m("naive_ddls")), cr.f("naive_s"), cr.f("naive_ddl_s"))
		}
		p("\n")
	}
	if len(inserts) > 0 {
		c0 := inserts[0].Cell
		p("### Insert-heavy log against the database's bulk load\n\n")
		p("The log: the same gen workload (`--rows %d`, seed 1) with no DDL after the initial CREATEs, of which only the inserts are written (its updates and deletes are left out), so that its final rows are the rows inserted, in transactions of up to 8 rows at a commit ts each. "+
			"**apply** = as above (reader.Open and apply.Run, default options, into a fresh downstream; its time includes the log's 5 CREATE DDLs). "+
			"**bulk** = the database's own bulk path loading the same rows (read back from the log after the apply, untimed, so that the apply does not run beside them in memory), values bound as the sink binds them, into another fresh downstream of the same sink and settings whose tables the sink's ApplyDDL created from the log's CREATEs (untimed), in one transaction on one connection, timed from the first row to the commit: MariaDB, `LOAD DATA LOCAL INFILE` per table (tab-separated text streamed through go-sql-driver's reader handler; the cell sets local_infile=1 when the server has it off and restores it after); PostgreSQL, `COPY … FROM STDIN` per table (pgx CopyFrom, binary format); SQLite, one prepared INSERT per table run for each row. "+
			"The two downstreams must then hold as many rows as the log inserted, with the same digest (FNV-64 of every row of every table in key order, each value's scanned type and text), or the repetition fails. "+
			durability+
			"CPU s = user + sys of the child (getrusage), the server's not included; machine CPU s = every process's (/proc/stat), the server's included, over the same time. Ratio = apply rows/s ÷ bulk rows/s within each repetition. Target (issue 27): ≥ 0.5×.\n\n", c0.Rows)
		p("| sink | settings | rows | apply rows/s | apply CPU s (machine) | bulk path | bulk rows/s | bulk CPU s (machine) | apply ÷ bulk | target | verdict | peak RSS MiB |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, cr := range inserts {
			verdict := r.verdict(cr.Cell.ID)
			if cr.Unavailable != "" {
				p("| %s | not available: %s | | | | %s | | | | ≥ 0.5× | %s | |\n", cr.Cell.Sink, cr.Unavailable, bulkPath(cr.Cell.Sink), verdict)
				continue
			}
			p("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | ≥ 0.5× | **%s** | %s |\n", cr.Cell.Sink, cr.errNote(), applySettings(cr),
				human(cr.m("log_rows")), cr.f("apply_rows_s"), withMachine(cr, "apply"), bulkPath(cr.Cell.Sink),
				cr.f("bulk_rows_s"), withMachine(cr, "bulk"), cr.ratio("ratio_apply_bulk"), verdict, cr.f("rss_mib"))
		}
		p("\n")
	}
}

// withMachine is a side's CPU seconds, and the machine's over the same
// time where the report has them.
func withMachine(cr *CellReport, side string) string {
	own := cr.f(side + "_cpu_s")
	if _, ok := cr.Metrics[side+"_machine_cpu_s"]; !ok {
		return own
	}
	return own + " (" + cr.f(side+"_machine_cpu_s") + ")"
}

// renderApplySnippet is the README's apply tables: each sink against its
// naive baseline and against its bulk load, the targets and whether each
// is met.
func renderApplySnippet(p func(string, ...any), r *Report) {
	mixed := r.cell(func(c Cell) bool { return c.Kind == "apply" && c.Mix != applyInsert })
	inserts := r.cell(func(c Cell) bool { return c.Kind == "apply" && c.Mix == applyInsert })
	settings := func(cr *CellReport) string { return strings.TrimSuffix(applySettings(cr), " (the sink's defaults)") }
	if len(mixed) > 0 {
		p("\n| `redokit apply` (gen log of %s row changes) | log | apply rows/s | naive per-row replay rows/s | apply ÷ naive | target | verdict |\n|---|---|---|---|---|---|---|\n", human(float64(mixed[0].Cell.Rows)))
		for _, cr := range mixed {
			verdict := r.verdict(cr.Cell.ID)
			need := fmt.Sprintf("≥ %g×", applyNeedOf(cr.Cell))
			if cr.Unavailable != "" {
				p("| %s | %s | – | – | – | %s | not available: %s |\n", cr.Cell.Sink, applyLogName(cr.Cell), need, cr.Unavailable)
				continue
			}
			naive := human(cr.m("naive_rows_s"))
			if n := cr.m("naive_rows"); n < float64(cr.Cell.Rows) {
				if m, ok := cr.Metrics["naive_mid_rows"]; ok {
					naive += fmt.Sprintf(" (%s rows from the start, %s from the middle: %s and %s rows/s)", human(n), human(m.Median),
						human(cr.m("naive_first_rows_s")), human(cr.m("naive_mid_rows_s")))
				} else {
					naive += fmt.Sprintf(" (first %s rows)", human(n))
				}
			}
			meas := "–"
			if s, ok := cr.Metrics["ratio_apply_naive"]; ok {
				meas = fmt.Sprintf("%.1f× (%.1f–%.1f)", s.Median, s.Min, s.Max)
			}
			p("| %s | %s | %s | %s | %s | %s | %s |\n", settings(cr), applyLogName(cr.Cell), human(cr.m("apply_rows_s")), naive, meas, need, verdict)
		}
	}
	if len(inserts) > 0 {
		p("\n| `redokit apply`, inserts only (of a gen workload of %s row changes) | rows | apply rows/s | bulk load | bulk rows/s | apply ÷ bulk | target | verdict |\n|---|---|---|---|---|---|---|---|\n", human(float64(inserts[0].Cell.Rows)))
		for _, cr := range inserts {
			verdict := r.verdict(cr.Cell.ID)
			if cr.Unavailable != "" {
				p("| %s | – | – | %s | – | – | ≥ 0.5× | not available: %s |\n", cr.Cell.Sink, bulkPath(cr.Cell.Sink), cr.Unavailable)
				continue
			}
			meas := "–"
			if s, ok := cr.Metrics["ratio_apply_bulk"]; ok {
				meas = fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Median, s.Min, s.Max)
			}
			p("| %s | %s | %s | %s | %s | %s | ≥ 0.5× | %s |\n", settings(cr), human(cr.m("log_rows")), human(cr.m("apply_rows_s")),
				bulkPath(cr.Cell.Sink), human(cr.m("bulk_rows_s")), meas, verdict)
		}
	}
}
