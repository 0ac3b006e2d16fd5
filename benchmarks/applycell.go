package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/benchkit"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/writer"
)

// sqliteSchema is the downstream schema of the generator's tables, for apply
// and for the naive replay alike.
func sqliteSchema(db *sql.DB, tables int) error {
	for s := range tables {
		q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS "%s" (id INTEGER NOT NULL PRIMARY KEY, acct INTEGER, status INTEGER, created TEXT, note TEXT)`, benchkit.Table(s).Name)
		if _, err := db.Exec(q); err != nil {
			return err
		}
	}
	return nil
}

// runApplyCell writes a log of Rows rows (untimed), then replays it into a
// fresh SQLite file with apply.Run (timed from reader.Open to the last
// commit), and replays its first NaiveRows rows naively: one INSERT per row,
// each its own transaction, on a SQLite file with the same settings.
func runApplyCell(ctx context.Context, in childInput, res *Result) error {
	c, be := in.Cell, in.Backend
	b, _, done, err := openBucket(ctx, be, in.Dir)
	if err != nil {
		return err
	}
	defer done()
	const logID = "apply"
	maxTs, err := writeLog(ctx, b, logID, c)
	if err != nil {
		return fmt.Errorf("write the log: %w", err)
	}
	dir, err := os.MkdirTemp(in.Dir, "redokit-apply-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// apply.Run.
	sink, err := sqlite.Open(ctx, "sqlite://"+filepath.Join(dir, "apply.db"), nil)
	if err != nil {
		return err
	}
	defer sink.Close()
	if err := sqliteSchema(sink.DB(), benchkit.Spans); err != nil {
		return err
	}
	t0 := time.Now()
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, EndTs: maxTs})
	if err != nil {
		return err
	}
	ar, err := apply.Run(ctx, r.CodecEvents(ctx), sink, nil)
	r.Close()
	if err != nil {
		return fmt.Errorf("apply.Run: %w", err)
	}
	el := time.Since(t0)
	if ar.Rows != int64(c.Rows) {
		return fmt.Errorf("apply.Run applied %d rows of %d", ar.Rows, c.Rows)
	}
	res.Metrics["apply_rows_s"] = float64(ar.Rows) / el.Seconds()
	res.Metrics["apply_txns"] = float64(ar.Transactions)
	res.Metrics["rss_mib"] = float64(peakRSS()) / mib

	// The naive replay.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "naive.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := sqliteSchema(db, benchkit.Spans); err != nil {
		return err
	}
	t0 = time.Now()
	r, err = reader.Open(ctx, b, &reader.Options{LogID: logID, EndTs: maxTs})
	if err != nil {
		return err
	}
	defer r.Close()
	n := 0
	for n < c.NaiveRows {
		ev, err := r.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if ev.Kind != codec.RowEvent {
			continue
		}
		cols := ev.Row.Columns
		q := fmt.Sprintf(`INSERT OR REPLACE INTO "%s" (id, acct, status, created, note) VALUES (?, ?, ?, ?, ?)`, ev.Row.Table.Name)
		if _, err := db.ExecContext(ctx, q, cols[0].Value.Int(), int64(cols[1].Value.Uint()), cols[2].Value.Int(),
			cols[3].Value.DateTime().String(), cols[4].Value.Text()); err != nil {
			return fmt.Errorf("naive insert: %w", err)
		}
		n++
	}
	nel := time.Since(t0)
	res.Metrics["naive_rows_s"] = float64(n) / nel.Seconds()
	res.Metrics["ratio_apply_naive"] = res.Metrics["apply_rows_s"] / res.Metrics["naive_rows_s"]
	return nil
}

// writeLog writes c.Rows rows of the generator into a log, flat out.
func writeLog(ctx context.Context, b *blob.Bucket, logID string, c Cell) (uint64, error) {
	w, err := writer.Open(ctx, b, &writer.Options{LogID: logID, WriterID: "w0", FlushInterval: 100 * time.Millisecond})
	if err != nil {
		return 0, err
	}
	defer w.Close(context.Background())
	for s := range benchkit.Spans {
		if err := w.AddSpan(writer.SpanID(s), benchkit.TsBase); err != nil {
			return 0, err
		}
	}
	g := benchkit.NewGen(1, c.RowSize, "rows")
	ts := benchkit.TsBase
	for rows := 0; rows < c.Rows; rows += benchkit.TxnRows {
		ts++
		span := int(ts % benchkit.Spans)
		evs := g.Next(span, ts)
		if k := c.Rows - rows; k < len(evs) {
			evs = evs[:k]
		}
		if err := w.Write(ctx, writer.SpanID(span), evs...); err != nil {
			return 0, err
		}
		if err := w.AdvanceResolved(writer.SpanID(span), ts); err != nil {
			return 0, err
		}
	}
	for s := range benchkit.Spans {
		if err := w.AdvanceResolved(writer.SpanID(s), ts); err != nil {
			return 0, err
		}
	}
	return ts, w.Close(ctx)
}
