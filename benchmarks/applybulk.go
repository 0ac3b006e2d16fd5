package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
)

// The insert cell measures `redokit apply` against the limit rather than
// against a strawman: the database's own bulk path (LOAD DATA on MariaDB,
// COPY on PostgreSQL, one transaction of prepared inserts on SQLite) loading
// the same final rows into a fresh downstream of the same sink and settings.

// runApplyInsertCell writes the insert-only gen log (untimed), replays it
// with apply.Run into a fresh downstream (timed from reader.Open to Run's
// return), digests the downstream's tables, then creates the same tables in
// another fresh downstream through the sink's ApplyDDL (untimed) and loads
// the log's rows with the bulk path (timed from the first row to the
// commit). The two downstreams must hold the same rows, as many as the log
// inserted, with the same digest, or the cell fails.
func runApplyInsertCell(ctx context.Context, in childInput, res *Result, env *applyEnv) error {
	c := in.Cell
	b, _, done, err := openBucket(ctx, in.Backend, in.Dir)
	if err != nil {
		return err
	}
	defer done()
	const logID = "apply-insert"
	cfg := genConfig(c.Rows, env.schema)
	cfg.DDLRate = -1 // the initial CREATEs only
	t0 := time.Now()
	l, err := writeGenLog(ctx, b, logID, cfg, true)
	if err != nil {
		return fmt.Errorf("write the insert-only gen log: %w", err)
	}
	var tables []string
	for _, ev := range l.ddlEvents {
		if ev.DDL.Type == codec.ActionCreateTable {
			tables = append(tables, ev.DDL.Table.Name)
		}
	}
	slices.Sort(tables)
	res.Metrics["log_rows"] = float64(l.rows)
	res.Metrics["log_ddls"] = float64(l.ddls)
	res.Metrics["log_write_s"] = time.Since(t0).Seconds()
	res.Metrics["gomaxprocs"] = float64(runtime.GOMAXPROCS(0))

	// apply.Run, as `redokit apply` runs it.
	sink, err := env.open(ctx, "apply", logID)
	if err != nil {
		return err
	}
	if err := env.settleDown(ctx); err != nil {
		sink.Close()
		return err
	}
	cpu0, gc0, busy0, t0 := cpuSeconds(), gcSeconds(), machineBusySeconds(), time.Now()
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, EndTs: l.lastTs})
	if err != nil {
		sink.Close()
		return err
	}
	ar, err := apply.Run(ctx, r.CodecEvents(ctx), sink, nil)
	r.Close()
	el, cpu, gc, busy := time.Since(t0), cpuSeconds()-cpu0, gcSeconds()-gc0, machineBusySeconds()-busy0
	if err != nil {
		sink.Close()
		return fmt.Errorf("apply.Run: %w", err)
	}
	if ar.Rows != l.rows {
		sink.Close()
		return fmt.Errorf("apply.Run applied %d row changes of the log's %d", ar.Rows, l.rows)
	}
	applied, err := digestTables(ctx, sink.DB(), env, tables)
	sink.Close()
	if err != nil {
		return fmt.Errorf("digest the rows apply left: %w", err)
	}
	if applied.rows != l.rows {
		return fmt.Errorf("apply.Run left %d rows downstream, the log inserted %d", applied.rows, l.rows)
	}
	res.Metrics["apply_rows_s"] = float64(ar.Rows) / el.Seconds()
	res.Metrics["apply_s"] = el.Seconds()
	res.Metrics["apply_cpu_s"] = cpu
	res.Metrics["apply_gc_cpu_s"] = gc
	res.Metrics["apply_machine_cpu_s"] = busy
	res.Metrics["apply_write_s"] = ar.WriteTime.Seconds()
	res.Metrics["apply_commit_s"] = ar.CommitTime.Seconds()
	res.Metrics["apply_txns"] = float64(ar.Transactions)
	res.Metrics["rss_mib"] = float64(peakRSS()) / mib
	if err := env.reset(ctx); err != nil {
		return err
	}

	// The bulk load of the same rows into the same tables, read back from
	// the log only now: rows held in memory through apply.Run would make
	// every collection of its garbage scan them (1 GiB at full size).
	inserts, err := readInserts(ctx, b, logID, l.lastTs)
	if err != nil {
		return err
	}
	bsink, err := env.open(ctx, "bulk", logID)
	if err != nil {
		return err
	}
	defer bsink.Close()
	for i := range l.ddlEvents {
		if err := bsink.ApplyDDL(ctx, &l.ddlEvents[i].DDL, apply.DDLMark{}); err != nil {
			return fmt.Errorf("bulk downstream: %s: %w", l.ddlEvents[i].DDL.Query, err)
		}
	}
	if err := env.settleDown(ctx); err != nil {
		return err
	}
	cpu0, busy0, t0 = cpuSeconds(), machineBusySeconds(), time.Now()
	if err := bulkLoad(ctx, env, bsink.DB(), inserts, tables); err != nil {
		return fmt.Errorf("bulk load (%s): %w", env.dialect, err)
	}
	bel, bcpu, bbusy := time.Since(t0), cpuSeconds()-cpu0, machineBusySeconds()-busy0
	loaded, err := digestTables(ctx, bsink.DB(), env, tables)
	if err != nil {
		return fmt.Errorf("digest the rows the bulk load left: %w", err)
	}
	if loaded != applied {
		return fmt.Errorf("the downstreams differ: apply.Run left %d rows (digest %016x), the bulk load %d (digest %016x)",
			applied.rows, applied.sum, loaded.rows, loaded.sum)
	}
	res.Metrics["bulk_rows_s"] = float64(loaded.rows) / bel.Seconds()
	res.Metrics["bulk_s"] = bel.Seconds()
	res.Metrics["bulk_cpu_s"] = bcpu
	res.Metrics["bulk_machine_cpu_s"] = bbusy
	res.Metrics["ratio_apply_bulk"] = res.Metrics["apply_rows_s"] / res.Metrics["bulk_rows_s"]
	res.Info["digest"] = fmt.Sprintf("%016x", loaded.sum)
	return nil
}

// readInserts reads the rows inserted in log logID up to endTs, by table,
// each row's columns its own.
func readInserts(ctx context.Context, b *blob.Bucket, logID string, endTs uint64) (map[string][][]codec.Column, error) {
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, EndTs: endTs})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	rows := map[string][][]codec.Column{}
	for ev, err := range r.CodecEvents(ctx) {
		if err != nil {
			return nil, fmt.Errorf("read the inserts back: %w", err)
		}
		if ev.Kind != codec.RowEvent || ev.Row.Op() != codec.OpInsert {
			continue
		}
		c := ev.Clone()
		rows[c.Row.Table.Name] = append(rows[c.Row.Table.Name], c.Row.Columns)
	}
	return rows, nil
}

// digest is what two downstreams must agree on: their rows, and a hash of
// every table's rows in key order (each value's Go type and text as the
// driver scans it).
type digest struct {
	rows int64
	sum  uint64
}

func digestTables(ctx context.Context, db *sql.DB, env *applyEnv, tables []string) (digest, error) {
	h := fnv.New64a()
	var d digest
	for _, t := range tables {
		fmt.Fprintf(h, "table %s\n", t)
		rows, err := db.QueryContext(ctx, "SELECT * FROM "+env.ref(t)+" ORDER BY 1")
		if err != nil {
			return d, fmt.Errorf("table %s: %w", t, err)
		}
		cols, err := rows.Columns()
		if err != nil {
			rows.Close()
			return d, fmt.Errorf("table %s: %w", t, err)
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return d, fmt.Errorf("table %s: %w", t, err)
			}
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				fmt.Fprintf(h, "%s=%T:%v\t", cols[i], v, v)
			}
			h.Write([]byte{'\n'})
			d.rows++
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return d, fmt.Errorf("table %s: %w", t, err)
		}
	}
	d.sum = h.Sum64()
	return d, nil
}

// bulkLoad loads rows (by table) into tables of db in one transaction,
// through the sink's bulk path, values bound as the SQL sink binds them.
func bulkLoad(ctx context.Context, env *applyEnv, db *sql.DB, rows map[string][][]codec.Column, tables []string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	switch env.dialect {
	case applyPostgres:
		return conn.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			tx, err := pc.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			for _, t := range tables {
				rs := rows[t]
				if len(rs) == 0 {
					continue
				}
				names, idx, err := bulkColumns(t, rs)
				if err != nil {
					return err
				}
				vals := make([]any, len(idx))
				n, err := tx.CopyFrom(ctx, pgx.Identifier{env.schema, t}, names, pgx.CopyFromSlice(len(rs), func(i int) ([]any, error) {
					for k, j := range idx {
						vals[k] = naiveArg(false, rs[i][j].Value)
					}
					return vals, nil
				}))
				if err != nil {
					return fmt.Errorf("COPY %s: %w", t, err)
				}
				if n != int64(len(rs)) {
					return fmt.Errorf("COPY %s: %d rows of %d", t, n, len(rs))
				}
			}
			return tx.Commit(ctx)
		})
	case applyMariaDB:
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, t := range tables {
			if err := loadData(ctx, tx, env.ref(t), t, rows[t]); err != nil {
				return err
			}
		}
		return tx.Commit()
	default:
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, t := range tables {
			rs := rows[t]
			if len(rs) == 0 {
				continue
			}
			names, idx, err := bulkColumns(t, rs)
			if err != nil {
				return err
			}
			q := "INSERT INTO " + env.ref(t) + " ("
			for k, name := range names {
				if k > 0 {
					q += ","
				}
				q += `"` + name + `"`
			}
			q += ") VALUES (?" + strings.Repeat(",?", len(names)-1) + ")"
			st, err := tx.PrepareContext(ctx, q)
			if err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
			args := make([]any, len(idx))
			for _, r := range rs {
				for k, j := range idx {
					args[k] = naiveArg(false, r[j].Value)
				}
				if _, err := st.ExecContext(ctx, args...); err != nil {
					st.Close()
					return fmt.Errorf("%s: %w", q, err)
				}
			}
			st.Close()
		}
		return tx.Commit()
	}
}

// bulkColumns returns the stored columns of table t's rows (names, and
// their indexes in each row): the rows of an insert-only log of one schema
// all have the same.
func bulkColumns(t string, rs [][]codec.Column) ([]string, []int, error) {
	idx := storedColumns(rs[0])
	names := make([]string, len(idx))
	for k, i := range idx {
		names[k] = rs[0][i].Name
	}
	for n, r := range rs {
		if len(r) != len(rs[0]) {
			return nil, nil, fmt.Errorf("table %s: row %d has %d columns, the first %d", t, n, len(r), len(rs[0]))
		}
	}
	return names, idx, nil
}

// loadData runs LOAD DATA LOCAL INFILE of rs into table ref in tx: the rows
// stream as tab-separated text through the driver's reader handler (the
// server must allow local_infile; the cell checks it).
func loadData(ctx context.Context, tx *sql.Tx, ref, t string, rs [][]codec.Column) error {
	if len(rs) == 0 {
		return nil
	}
	names, idx, err := bulkColumns(t, rs)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 256<<10)
		var buf []byte
		for _, r := range rs {
			buf = buf[:0]
			for k, j := range idx {
				if k > 0 {
					buf = append(buf, '\t')
				}
				buf = appendTSV(buf, naiveArg(true, r[j].Value))
			}
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		pw.CloseWithError(w.Flush())
	}()
	defer pr.Close() // a failed LOAD DATA leaves the writer blocked otherwise
	handler := "rkbench-" + t
	gomysql.RegisterReaderHandler(handler, func() io.Reader { return pr })
	defer gomysql.DeregisterReaderHandler(handler)
	q := "LOAD DATA LOCAL INFILE 'Reader::" + handler + "' INTO TABLE " + ref +
		` CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\t' ESCAPED BY '\\' LINES TERMINATED BY '\n' (`
	for k, name := range names {
		if k > 0 {
			q += ","
		}
		q += "`" + name + "`"
	}
	q += ")"
	r, err := tx.ExecContext(ctx, q)
	if err != nil {
		return fmt.Errorf("LOAD DATA into %s: %w", t, err)
	}
	if n, err := r.RowsAffected(); err != nil || n != int64(len(rs)) {
		return fmt.Errorf("LOAD DATA into %s: %d rows of %d (%v)", t, n, len(rs), err)
	}
	return nil
}

// appendTSV appends a bound value as LOAD DATA's default format reads it:
// \N for NULL, and backslash escapes for the separators, NUL and itself.
func appendTSV(b []byte, v any) []byte {
	var s string
	switch x := v.(type) {
	case nil:
		return append(b, `\N`...)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case string:
		s = x
	case []byte:
		s = string(x)
	default:
		s = fmt.Sprint(x)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case 0:
			b = append(b, `\0`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
