package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/writer"
)

// snapshotWriter is the writer ID the initial snapshot is logged under: its
// events belong to every span, and the captures' writers take the spans over
// above it.
const snapshotWriter = "pgcdc-snapshot"

// snapshotBatch is how many rows of one span go to the log in one Write:
// the snapshot holds no more than this per span (plus the writer's buffer,
// which its memory quota bounds), whatever the tables' sizes.
const snapshotBatch = 512

// snapshotMemoryQuota is the snapshot writer's memory quota: a Write that
// would pass it waits for a flush or a stage cut (the snapshot's rows all
// share one commit ts, so they are staged), whatever the table's size.
var snapshotMemoryQuota int64 = 64 << 20

// ErrSnapshotIncomplete is an initial snapshot that did not finish: the
// snapshot PostgreSQL exported for it lived only as long as the process
// that took it, so it cannot be resumed, and the slots have moved past the
// state it showed.
var ErrSnapshotIncomplete = errors.New("the initial snapshot did not finish")

// snapshot is the tables' state at the log's start: a REPEATABLE READ
// transaction that imported the snapshot a temporary replication slot
// exported, at its consistent point lsn. Every transaction that committed
// below lsn is in it, and no later one; the slots send those above.
type snapshot struct {
	lsn  uint64
	conn *pgx.Conn
	tx   pgx.Tx
}

// The log's timestamps at a snapshot whose consistent point is S. A slot
// sends every transaction whose commit record starts at or above S (one may
// start at S itself), and the snapshot holds those below. So its rows are at
// S-1 (snapshotTs), its CREATE TABLEs at S-2 (at one commit ts the log puts
// rows before DDLs), and the log starts at S-3; the captures drop what the
// slots send at or below S-1, and keep the rest.
func snapshotStart(s uint64) uint64 { return s - 3 }

func snapshotTs(s uint64) uint64 { return s - 1 }

// exportSnapshot creates a temporary replication slot named slot that
// exports its snapshot, imports that into a transaction, and drops the slot
// (closing its connection): the imported snapshot lives on in the
// transaction. Create it after the real slots: its consistent point is then
// at or above theirs, and what they send at or below it is in it.
func exportSnapshot(ctx context.Context, dsn, slot string) (_ *snapshot, err error) {
	rc, err := replConnect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer rc.Close(context.Background())
	res, err := pglogrepl.CreateReplicationSlot(ctx, rc, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		Temporary: true, SnapshotAction: "EXPORT_SNAPSHOT", Mode: pglogrepl.LogicalReplication,
	})
	if err != nil {
		return nil, fmt.Errorf("upstream: create the temporary slot %s that exports the initial snapshot: %w", slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return nil, fmt.Errorf("upstream: slot %s: consistent point %q: %w", slot, res.ConsistentPoint, err)
	}
	conn, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			conn.Close(context.Background())
		}
	}()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(res.SnapshotName, "'", "''")+"'"); err != nil {
		return nil, fmt.Errorf("upstream: import snapshot %s of slot %s: %w", res.SnapshotName, slot, err)
	}
	return &snapshot{lsn: uint64(lsn), conn: conn, tx: tx}, nil
}

func (s *snapshot) close() {
	s.tx.Rollback(context.Background())
	s.conn.Close(context.Background())
}

// snapshotState is the state directory's record of the initial snapshot:
// "pending LSN" from before the log exists until the snapshot is logged,
// then "done LSN". Captures wait while it is
// pending; a coordinator that finds it pending on a restart refuses with
// ErrSnapshotIncomplete.
func snapshotStatePath(dir string) string { return filepath.Join(dir, "snapshot") }

func writeSnapshotState(dir, state string, lsn uint64) error {
	path := snapshotStatePath(dir)
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s\n", state, pglogrepl.LSN(lsn))
	if err == nil {
		err = f.Sync() // the record is what a restart trusts
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(path+".tmp", path)
	}
	if err == nil {
		// The rename is durable once the directory is.
		var d *os.File
		if d, err = os.Open(dir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("initial snapshot: record %s: %w", path, err)
	}
	return nil
}

// readSnapshotState returns the record; state "" when there is none (the
// slots were made without a snapshot, by an older pgcdc).
func readSnapshotState(dir string) (state string, lsn uint64, err error) {
	b, err := os.ReadFile(snapshotStatePath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 2 && (f[0] == "pending" || f[0] == "done") {
		if l, err := pglogrepl.ParseLSN(f[1]); err == nil {
			return f[0], uint64(l), nil
		}
	}
	return "", 0, fmt.Errorf("initial snapshot record %s: %q is not \"pending|done LSN\"", snapshotStatePath(dir), b)
}

// incompleteSnapshot is the error of a restart that finds the snapshot
// pending.
func incompleteSnapshot(cfg *config, lsn uint64) error {
	return fmt.Errorf("%w: the snapshot at LSN %s (%s says pending) was interrupted, and PostgreSQL's exported snapshot ended with the process that took it: "+
		"to start over, stop every capture, drop the replication slots %s, remove the log %s and %s, empty the downstream, and run again",
		ErrSnapshotIncomplete, pglogrepl.LSN(lsn), snapshotStatePath(cfg.State), strings.Join(cfg.slots(), ", "), cfg.Log, snapshotStatePath(cfg.State))
}

// waitSnapshot waits while the initial snapshot is being logged, and
// returns its LSN once done (0 without one).
func waitSnapshot(ctx context.Context, cfg *config, logger *slog.Logger) (uint64, error) {
	warned := false
	for {
		state, lsn, err := readSnapshotState(cfg.State)
		if err != nil || state != "pending" {
			return lsn, err
		}
		if !warned {
			logger.Info("waiting for the initial snapshot to be logged", "lsn", pglogrepl.LSN(lsn).String())
			warned = true
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(cfg.Tick):
		}
	}
}

// logSnapshot writes the snapshot's tables to the log under snapshotWriter:
// for each table of -tables that exists in it, its CREATE TABLE and its
// rows (see snapshotStart), streamed in batches. Then it resolves every span
// at the snapshot, publishes, closes and removes the writer, and records the
// snapshot done. The slots are left where they were made: the captures drop
// what they send below the snapshot's LSN (its record says where), and
// acknowledge it. The captures then replay it from the log
// into their downstreams like any range below their slots' confirmed LSN.
func logSnapshot(ctx context.Context, cfg *config, lg *redokit.Log, coord *meta.Coordinator, snap *snapshot, spans *spanMap) error {
	s := snap.lsn
	w, err := lg.OpenWriter(ctx, snapshotWriter, &writer.Options{FlushInterval: cfg.FlushInterval, MemoryQuota: snapshotMemoryQuota, Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("initial snapshot: %w", err)
	}
	closed := false
	defer func() {
		if !closed {
			w.Close(context.Background())
		}
	}()
	for _, sp := range spans.all {
		if err := w.AddSpan(sp, snapshotStart(s)); err != nil {
			return err
		}
	}
	tables := slices.SortedFunc(func(yield func(*tableSpans) bool) {
		for _, t := range spans.tables {
			if !yield(t) {
				return
			}
		}
	}, func(a, b *tableSpans) int { return int(a.first) - int(b.first) })
	began := time.Now()
	var total int64
	for _, t := range tables {
		n, err := snap.logTable(ctx, w, t)
		if err != nil {
			return fmt.Errorf("initial snapshot at LSN %s: %w", pglogrepl.LSN(s), err)
		}
		total += n
	}
	for _, sp := range spans.all {
		if err := w.AdvanceResolved(sp, snapshotTs(s)); err != nil {
			return err
		}
	}
	if _, err := w.Publish(ctx); err != nil {
		return fmt.Errorf("initial snapshot: publish: %w", err)
	}
	closed = true
	if err := w.Close(ctx); err != nil {
		return fmt.Errorf("initial snapshot: close its writer: %w", err)
	}
	// Its progress stays in the spans' flushed ts; as a live writer it
	// would look stale from now on.
	if err := coord.RemoveWriter(ctx, snapshotWriter); err != nil {
		return err
	}
	if err := snap.tx.Commit(ctx); err != nil {
		return err
	}
	if err := writeSnapshotState(cfg.State, "done", s); err != nil {
		return err
	}
	cfg.Logger.Info("initial snapshot logged", "lsn", pglogrepl.LSN(s).String(), "tables", len(tables), "rows", total, "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// logTable writes one table of the snapshot, if it exists there; it returns
// the rows written.
func (snap *snapshot) logTable(ctx context.Context, w *writer.Writer, t *tableSpans) (int64, error) {
	s := snap.lsn
	// The capture maps tables to spans by name, whatever their schema.
	rows, err := snap.tx.Query(ctx, `SELECT c.oid, n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = $1 AND c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
		AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'`, t.name)
	if err != nil {
		return 0, err
	}
	type rel struct {
		OID    uint32
		Schema string
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[rel])
	if err != nil {
		return 0, fmt.Errorf("table %s: %w", t.name, err)
	}
	switch {
	case len(found) == 0:
		return 0, nil // created later: its CREATE TABLE comes from the slots
	case len(found) > 1:
		return 0, fmt.Errorf("table %s is in %d schemas: the capture maps tables by name", t.name, len(found))
	}
	oid, schema := found[0].OID, found[0].Schema
	tname := schema + "." + t.name
	var kind string
	if err := snap.tx.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = $1", oid).Scan(&kind); err != nil {
		return 0, err
	}
	if kind != "r" {
		return 0, fmt.Errorf("table %s is partitioned: the capture does not carry partitioned tables", tname)
	}
	rows, err = snap.tx.Query(ctx, `SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull, a.attgenerated <> '',
			a.attidentity <> '' OR coalesce(pg_get_expr(d.adbin, d.adrelid) LIKE 'nextval(%', false)
		FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`, oid)
	if err != nil {
		return 0, err
	}
	type attr struct {
		Name      string
		Type      uint32
		Typmod    int32
		NotNull   bool
		Generated bool
		Auto      bool
	}
	attrs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attr])
	if err != nil {
		return 0, fmt.Errorf("table %s: its columns: %w", tname, err)
	}
	pk, err := primaryKey(ctx, snap.tx, oid)
	if err != nil {
		return 0, fmt.Errorf("table %s: its primary key: %w", tname, err)
	}
	cols := make([]relCol, len(attrs))
	defs := make([]string, len(attrs))
	sel := make([]string, len(attrs))
	keyIdx := -1
	for i, a := range attrs {
		if a.Generated {
			// pgoutput leaves generated columns out of the rows it sends.
			return 0, fmt.Errorf("table %s column %s is generated: the capture does not carry generated columns", tname, a.Name)
		}
		ct, err := mapColumn(tname, a.Name, a.Type, a.Typmod)
		if err != nil {
			return 0, err
		}
		typ, err := ct.mysqlType()
		if err != nil {
			return 0, fmt.Errorf("table %s column %s: %w", tname, a.Name, err)
		}
		defs[i] = quote(a.Name) + " " + typ
		if a.NotNull {
			defs[i] += " NOT NULL"
		}
		if a.Auto && len(pk) > 0 && pk[0] == a.Name {
			defs[i] += " AUTO_INCREMENT" // as translateDDL does for serial and identity
		}
		cols[i] = relCol{name: a.Name, ct: ct, pk: slices.Contains(pk, a.Name)}
		sel[i] = pgx.Identifier{a.Name}.Sanitize() + "::text"
		if t.keyCol == a.Name {
			if ct.typ != codec.TypeShort && ct.typ != codec.TypeLong && ct.typ != codec.TypeLonglong {
				return 0, fmt.Errorf("table %s: split key column %s is not an integer", tname, a.Name)
			}
			keyIdx = i
		}
	}
	if t.keyCol != "" && keyIdx < 0 {
		return 0, fmt.Errorf("table %s: split key column %s is not one of its columns", tname, t.keyCol)
	}
	create := "CREATE TABLE " + quote(t.name) + " (" + strings.Join(defs, ", ")
	if len(pk) > 0 {
		q := make([]string, len(pk))
		for i, c := range pk {
			q[i] = quote(c)
		}
		create += ", PRIMARY KEY (" + strings.Join(q, ", ") + ")"
	}
	create += ")"
	tn := codec.TableName{Schema: schema, Name: t.name, PhysicalID: int64(oid)}
	ddl := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
		Type: codec.ActionCreateTable, Table: tn, Query: create, StartTs: snapshotStart(s), CommitTs: snapshotTs(s) - 1,
		Tables: []codec.DDLTable{{TableName: tn, Role: codec.RoleCreated}},
	}}
	if err := w.Write(ctx, t.first, ddl); err != nil {
		return 0, err
	}

	// The rows, as the stream would carry them: each value's text, mapped
	// as pgoutput's is. pgx hands rows over as they arrive; at most a
	// batch per span is held.
	rows, err = snap.tx.Query(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM ONLY "+pgx.Identifier{schema, t.name}.Sanitize())
	if err != nil {
		return 0, fmt.Errorf("table %s: read its rows: %w", tname, err)
	}
	defer rows.Close()
	batches := map[meta.SpanID][]codec.Event{}
	flush := func(sp meta.SpanID) error {
		if len(batches[sp]) == 0 {
			return nil
		}
		err := w.Write(ctx, sp, batches[sp]...)
		batches[sp] = nil
		return err
	}
	var n int64
	for rows.Next() {
		raw := rows.RawValues()
		img := make([]codec.Column, len(cols))
		for i, rc := range cols {
			v := codec.Null()
			if raw[i] != nil {
				if v, err = rc.ct.toValue(tname, rc.name, raw[i]); err != nil {
					return 0, err
				}
			}
			img[i] = logColumn(rc, v)
		}
		sp := t.first
		if keyIdx >= 0 {
			k := img[keyIdx].Value
			if k.Kind() != codec.KindInt {
				return 0, fmt.Errorf("table %s: split key %s is %v, not an integer", tname, t.keyCol, k)
			}
			sp = t.span(k.Int())
		}
		batches[sp] = append(batches[sp], codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{Table: tn, Columns: img, StartTs: snapshotTs(s) - 1, CommitTs: snapshotTs(s)}})
		n++
		if len(batches[sp]) >= snapshotBatch {
			if err := flush(sp); err != nil {
				return 0, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("table %s: read its rows: %w", tname, err)
	}
	for sp := range batches {
		if err := flush(sp); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// primaryKey reads a table's primary-key columns, in key order.
func primaryKey(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, oid uint32) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT a.attname FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
		WHERE i.indrelid = $1 AND i.indisprimary ORDER BY k.n`, oid)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
