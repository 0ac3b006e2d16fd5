package sinkgate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/sinkgate"
	"github.com/redokit/redokit/testkit/testenv"
)

var errCommit = errors.New("injected: commit reported failed")

// failAfterCommit is a sink whose nth commit lands but reports a failure
// that is not transient, as a process that dies right after COMMIT would
// see: Run stops, the gate keeps the batch, and the retry must skip what
// committed.
type failAfterCommit struct {
	*sqlite.Sink
	n, commits int
}

func (f *failAfterCommit) Begin(ctx context.Context) (apply.Tx, error) {
	tx, err := f.Sink.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &failTx{Tx: tx, f: f}, nil
}

type failTx struct {
	apply.Tx
	f *failAfterCommit
}

func (t *failTx) Commit(ctx context.Context, marks []apply.Mark) error {
	if err := t.Tx.Commit(ctx, marks); err != nil {
		return err
	}
	if t.f.commits++; t.f.commits == t.f.n {
		return errCommit
	}
	return nil
}

func rowOf(ts uint64, table string, id int64, key bool) codec.Event {
	var flags codec.ColumnFlag
	if key {
		flags = codec.FlagPrimaryKey
	}
	return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{StartTs: ts - 1, CommitTs: ts,
		Table: codec.TableName{Schema: "db", Name: table},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: flags, Value: codec.IntValue(id)},
			{Name: "v", Type: codec.TypeVarchar, Value: codec.StringValue("v")},
		}}}
}

func ddlOf(ts uint64, table string, action codec.ActionType, q string) codec.Event {
	return codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: ts - 1, CommitTs: ts,
		Table: codec.TableName{Schema: "db", Name: table}, Type: action, Query: q}}
}

func downIDs(t *testing.T, db *sql.DB, table string) []int64 {
	t.Helper()
	rows, err := db.Query("SELECT id FROM " + table + " ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// downSink opens a SQLite downstream in a fresh file, closed with t.
func downSink(t *testing.T, o *apply.SinkOptions) *sqlite.Sink {
	t.Helper()
	s, err := sqlite.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "down.db"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestApplyToRetry: a batch that fails after some of its transactions
// committed comes again (the gate retries it), then once more (a failover
// that replays it); each time it ends where one clean pass would, a table
// dropped and created again included: its rows are written again after the
// DDLs run again, none is skipped.
func TestApplyToRetry(t *testing.T) {
	ctx := context.Background()
	s := downSink(t, nil)
	batch := []codec.Event{
		ddlOf(10, "k", codec.ActionCreateTable, "CREATE TABLE k (id BIGINT PRIMARY KEY, v VARCHAR(10))"),
		ddlOf(10, "r", codec.ActionCreateTable, "CREATE TABLE r (id BIGINT PRIMARY KEY, v VARCHAR(10))"),
	}
	var want, wantR []int64
	for i := range int64(40) {
		ts := uint64(20 + i)
		batch = append(batch, rowOf(ts, "k", i, true), rowOf(ts, "r", i, true))
		want = append(want, i)
	}
	// r is dropped and created again, then gets rows of its own.
	batch = append(batch,
		ddlOf(70, "r", codec.ActionDropTable, "DROP TABLE r"),
		ddlOf(71, "r", codec.ActionCreateTable, "CREATE TABLE r (id BIGINT PRIMARY KEY, v VARCHAR(10))"))
	for i := range int64(20) {
		batch = append(batch, rowOf(uint64(80+i), "r", 100+i, true))
		wantR = append(wantR, 100+i)
	}
	opts := &apply.Options{BatchRows: 4, TxnRows: 10, MaxRetries: -1}
	check := func(when string) {
		t.Helper()
		if got := downIDs(t, s.DB(), "k"); !slices.Equal(got, want) {
			t.Errorf("%s: k holds %v, want %v", when, got, want)
		}
		if got := downIDs(t, s.DB(), "r"); !slices.Equal(got, wantR) {
			t.Errorf("%s: r holds %v, want %v", when, got, wantR)
		}
	}
	// Fail after the recreated r got some of its rows.
	f := &failAfterCommit{Sink: s, n: 8}
	if err := sinkgate.ApplyTo(f, opts).Apply(ctx, batch); !errors.Is(err, errCommit) {
		t.Fatalf("first try: %v after %d commits", err, f.commits)
	}
	if got := downIDs(t, s.DB(), "r"); len(got) == 0 || len(got) == len(wantR) || got[0] != 100 {
		t.Fatalf("the first try left r with %v: want some of the recreated table's rows, not all", got)
	}
	if err := sinkgate.ApplyTo(f, opts).Apply(ctx, batch); err != nil {
		t.Fatalf("retry: %v", err)
	}
	check("retried")
	if err := sinkgate.ApplyTo(s, opts).Apply(ctx, batch); err != nil {
		t.Fatal(err)
	}
	check("replayed")
	// A recovery over the same events into the same downstream (apply.Run
	// with its own progress) ends the same: the gate left it no marks that
	// would skip rows a DDL run again removed.
	if _, err := apply.Run(ctx, apply.SliceSource(batch), s, opts); err != nil {
		t.Fatal(err)
	}
	check("recovered")
}

// TestApplyToCatchUp: rows of a table that come after a DDL of a later
// commit ts (a span catching up after a failover, or another gate) are
// applied, not taken as covered by the DDL; and the gate leaves the
// progress a recovery keeps in the downstream as it was.
func TestApplyToCatchUp(t *testing.T) {
	ctx := context.Background()
	s := downSink(t, nil)
	// A recovery ran before the gate: its marks are in the downstream.
	if _, err := apply.Run(ctx, apply.SliceSource([]codec.Event{
		ddlOf(5, "c", codec.ActionCreateTable, "CREATE TABLE c (id BIGINT PRIMARY KEY, v TEXT)"),
		rowOf(6, "c", 1, true),
	}), s, nil); err != nil {
		t.Fatal(err)
	}
	before, err := s.Progress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down := sinkgate.ApplyTo(s, nil)
	for _, b := range [][]codec.Event{
		{ddlOf(10, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT PRIMARY KEY, v TEXT)"),
			ddlOf(10, "b", codec.ActionCreateTable, "CREATE TABLE b (id BIGINT PRIMARY KEY, v TEXT)")},
		{rowOf(20, "a", 1, true), ddlOf(30, "a", codec.ActionAddColumn, "ALTER TABLE a ADD COLUMN c INT")},
		{rowOf(25, "b", 2, true), rowOf(26, "b", 3, true)}, // b's span, catching up behind ts 30
		{rowOf(25, "b", 2, true)}, // and a batch that comes again
	} {
		if err := down.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if got := downIDs(t, s.DB(), "b"); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("b holds %v, want [2 3]", got)
	}
	after, err := s.Progress(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, after) || after.DDL.CommitTs != 5 {
		t.Errorf("progress %+v after the gate, %+v before: the gate must leave it as the recovery did", after, before)
	}
}

// fkRow is a row change of table p (id, v) or c (id, pid), the child of p,
// on span 1 or 2: an insert with ins, else a delete.
func fkRow(span meta.SpanID, ts uint64, table string, id, pid int64, ins bool) codec.Event {
	img := []codec.Column{{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(id)}}
	if table == "c" {
		img = append(img, codec.Column{Name: "pid", Type: codec.TypeLonglong, Flags: codec.FlagNullable | codec.FlagMultipleKey, Value: codec.IntValue(pid)})
	} else {
		img = append(img, codec.Column{Name: "v", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Value: codec.StringValue(fmt.Sprint("p", id))})
	}
	r := codec.RowChange{StartTs: ts - 1, CommitTs: ts, Table: codec.TableName{Schema: "db", Name: table, PhysicalID: int64(span)}}
	if ins {
		r.Columns = img
	} else {
		r.PreColumns = img
	}
	return codec.Event{Kind: codec.RowEvent, Row: r}
}

// TestApplyToForeignKeys: behind a gate, a SQLite downstream that keeps its
// foreign-key checks on gets each upstream transaction in an order the
// checks accept, whatever order its tables' spans reached the gate in: the
// sink's CommitOrderer and its Tx's GroupApplier reach apply.Run through
// ApplyTo. Here a parent and its children are inserted in one transaction
// and deleted in another, all in one released batch, with the children's
// span first for the inserts and the parent's first for the deletes.
func TestApplyToForeignKeys(t *testing.T) {
	ctx := context.Background()
	s := downSink(t, &apply.SinkOptions{ForeignKeyChecks: true})
	cp := &cps{}
	g, G := newGate(t, 0, cp, sinkgate.ApplyTo(s, nil), nil)
	must(t, g.AddSpan(ctx, 1, 0)) // table p
	must(t, g.AddSpan(ctx, 2, 0)) // table c
	must(t, g.Write(ctx, 1, codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: 9, CommitTs: 10, Type: codec.ActionCreateTable,
		Table: codec.TableName{Schema: "db", Name: "p", PhysicalID: 1}, Query: "CREATE TABLE p (id BIGINT PRIMARY KEY, v VARCHAR(10))"}}))
	must(t, g.Write(ctx, 2, codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: 10, CommitTs: 11, Type: codec.ActionCreateTable,
		Table: codec.TableName{Schema: "db", Name: "c", PhysicalID: 2},
		Query: "CREATE TABLE c (id BIGINT PRIMARY KEY, pid BIGINT, FOREIGN KEY (pid) REFERENCES p (id))"}}))
	// ts 20 inserts parents 1..3 and their children; the children's span
	// reaches the gate first.
	must(t, g.Write(ctx, 2, fkRow(2, 20, "c", 10, 1, true), fkRow(2, 20, "c", 11, 1, true),
		fkRow(2, 20, "c", 20, 2, true), fkRow(2, 20, "c", 30, 3, true)))
	must(t, g.Write(ctx, 1, fkRow(1, 20, "p", 1, 0, true), fkRow(1, 20, "p", 2, 0, true), fkRow(1, 20, "p", 3, 0, true)))
	// ts 30 deletes parent 1 and its children; the parent's span first.
	must(t, g.Write(ctx, 1, fkRow(1, 30, "p", 1, 0, false)))
	must(t, g.Write(ctx, 2, fkRow(2, 30, "c", 10, 1, false), fkRow(2, 30, "c", 11, 1, false)))
	must(t, g.AdvanceResolved(1, 40))
	must(t, g.AdvanceResolved(2, 40))
	r := runGate(t, g)
	G.Set(40)
	testenv.WaitFor(t, "the checkpoint to reach 40, or Run to fail", func() bool {
		select {
		case <-r.done:
			return true
		default:
		}
		ts, _ := cp.last()
		return ts == 40
	})
	select {
	case <-r.done:
		t.Fatalf("Run: %v", r.err)
	default:
	}
	if st := g.Stats(); st.Batches != 1 || st.Released != 12 {
		t.Errorf("stats %+v: want the 12 events released in one batch", st)
	}
	if got := downIDs(t, s.DB(), "p"); !slices.Equal(got, []int64{2, 3}) {
		t.Errorf("p holds %v, want [2 3]", got)
	}
	if got := downIDs(t, s.DB(), "c"); !slices.Equal(got, []int64{20, 30}) {
		t.Errorf("c holds %v, want [20 30]", got)
	}
	// The checks were on: an orphan is refused.
	if err := sinkgate.ApplyTo(s, nil).Apply(ctx, []codec.Event{fkRow(2, 50, "c", 40, 9, true)}); err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
		t.Errorf("an orphan child: %v, want a foreign-key failure", err)
	}
}

// TestApplyToSplitTooLate: a batch holding a transaction larger than
// SplitBytes that inserts rows and then deletes some (one that must be
// applied whole) goes in parts, fails as split too late, and is applied
// again whole by the same Apply: the gate, which would retry it as it was,
// would fail the same way for good.
func TestApplyToSplitTooLate(t *testing.T) {
	ctx := context.Background()
	s := downSink(t, nil)
	batch := []codec.Event{ddlOf(10, "k", codec.ActionCreateTable, "CREATE TABLE k (id BIGINT PRIMARY KEY, v VARCHAR(10))")}
	var want []int64
	for i := range int64(300) {
		batch = append(batch, rowOf(20, "k", i, true))
	}
	for i := range int64(300) {
		if i%3 == 0 {
			del := rowOf(20, "k", i, true)
			del.Row.PreColumns, del.Row.Columns = del.Row.Columns, nil
			batch = append(batch, del)
		} else {
			want = append(want, i)
		}
	}
	opts := &apply.Options{BatchRows: 16, SplitBytes: 4 << 10}
	if _, err := apply.Run(ctx, apply.SliceSource(batch), downSink(t, nil), opts); !errors.Is(err, apply.ErrSplitTooLate) {
		t.Fatalf("apply.Run of the batch in parts: %v; want ErrSplitTooLate (else this test proves nothing)", err)
	}
	if err := sinkgate.ApplyTo(s, opts).Apply(ctx, batch); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if got := downIDs(t, s.DB(), "k"); !slices.Equal(got, want) {
		t.Fatalf("k holds %d rows, want %d", len(got), len(want))
	}
}
