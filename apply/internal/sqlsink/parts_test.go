package sqlsink_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// TestLargeTransactionsInParts: upstream transactions far larger than
// Options.SplitBytes — a bulk load, an UPDATE of every row that keeps
// keys, a DELETE of a third then inserts — go to each sink in parts
// (apply.CommitTsSplitter), Run holding a small share of each at once, and
// end with exactly the rows one whole apply would leave, with no conflict
// counted. A transaction that inserts and then deletes what it inserted
// must be applied whole: it fails as split too late (apply.ErrSplitTooLate,
// naming the table), commits none of it, and a rerun that holds it whole
// ends the same.
func TestLargeTransactionsInParts(t *testing.T) {
	const n = 20000
	forEachDialect(t, func(t *testing.T, e *env) {
		row := func(k int64, v string) []codec.Column {
			return []codec.Column{icol("k", k, pk), scol("v", v)}
		}
		model := map[int64][]codec.Column{}
		at := map[uint64][]string{0: nil} // the rows after each commit ts
		var evs []*codec.Event
		change := func(ts uint64, pre, post []codec.Column) {
			if _, ok := at[ts-1]; !ok && ts > 10 {
				at[ts-1] = dumpImages(model)
			}
			evs = append(evs, rowEv(ts, e.schema, "big", pre, post))
			if pre != nil {
				delete(model, pre[0].Value.Int())
			}
			if post != nil {
				model[post[0].Value.Int()] = post
			}
		}
		evs = append(evs, ddlEv(9, e.schema, "big", codec.ActionCreateTable, "CREATE TABLE big (k BIGINT PRIMARY KEY, v VARCHAR(32))"))
		for k := range int64(n) {
			change(10, nil, row(k, fmt.Sprint("load ", k)))
		}
		for k := range int64(n) {
			change(11, row(k, fmt.Sprint("load ", k)), row(k, fmt.Sprint("updated ", k)))
		}
		for k := int64(0); k < n; k += 3 {
			change(12, row(k, fmt.Sprint("updated ", k)), nil)
		}
		for k := int64(n); k < n+n/3; k++ {
			change(12, nil, row(k, fmt.Sprint("new ", k)))
		}
		// Then inserts, and deletes of what they inserted: whole.
		for k := int64(2 * n); k < 2*n+n/2; k++ {
			change(13, nil, row(k, "brief"))
		}
		for k := int64(2 * n); k < 2*n+n/2; k += 2 {
			change(13, row(k, "brief"), nil)
		}
		want := dumpImages(model)

		s := e.open(nil)
		o := &apply.Options{BatchRows: 256, TxnRows: 1000, SplitBytes: 64 << 10}
		res, err := apply.Run(context.Background(), sliceSource(evs), s, o)
		if !errors.Is(err, apply.ErrSplitTooLate) || !strings.Contains(err.Error(), e.schema+".big at commit ts 13") {
			t.Fatalf("Run: %v; want ErrSplitTooLate naming %s.big at commit ts 13", err, e.schema)
		}
		// What committed is whole commit ts, up to the recorded progress
		// (the workers may not have committed all of 12 when the run
		// stopped), and none of 13.
		done := e.progress().Tables[apply.Table{Schema: e.schema, Name: "big"}]
		if got := e.dump("big"); done > 12 || !slices.Equal(got, at[done]) {
			t.Fatalf("after the failed run big is applied up to commit ts %d and holds %d rows, want %d", done, len(got), len(at[done]))
		}
		if res.Splits == 0 || res.PeakRows > n/4 {
			t.Fatalf("%d splits, up to %d rows held; want transactions of %d rows in parts, a small share held", res.Splits, res.PeakRows, n)
		}
		t.Logf("%d splits, up to %d rows held at once", res.Splits, res.PeakRows)
		if _, err := apply.Run(context.Background(), sliceSource(evs), s, &apply.Options{BatchRows: 256, TxnRows: 1000}); err != nil {
			t.Fatalf("rerun holding commit ts whole: %v", err)
		}
		if got := e.dump("big"); !slices.Equal(got, want) {
			t.Fatalf("big holds %d rows, want the model's %d", len(got), len(want))
		}
		if c := s.Conflicts(); !c.Zero() {
			t.Fatalf("conflicts %+v over the sink's own rows, want none", c)
		}
	})
}

// TestUniqueValueTakenFromEarlierCommitTsInPart: a part of a commit ts
// handed out with the rows of an earlier one (Run batches several commit ts
// into one call) holds images that meet on a unique value: row 46 holds "b"
// as commit ts 11 left it, and row 21 takes "b" at 12, whose change moving
// 46 away comes in the next part. Applied in commit-ts order, 21 replaces
// 46 (a conflict the sink counts) and the next part writes 46 back.
// PostgreSQL moved 21, a fresh insert, before 46 for COPY: 46 then replaced
// 21, which nothing wrote back, so a row was lost with the run a success;
// and where the two shared one statement, the statement failed again after
// its stale rows were deleted (23505), found by the differential fuzzer
// (seed 56009833).
func TestUniqueValueTakenFromEarlierCommitTsInPart(t *testing.T) {
	for _, copyRows := range []int{0, 1} {
		t.Run(fmt.Sprintf("copy-from-%d-rows", copyRows), func(t *testing.T) {
			defer sqlsink.SetMinCopyRows(sqlsink.SetMinCopyRows(copyRows))
			uniqueValueTakenInPart(t)
		})
	}
}

func uniqueValueTakenInPart(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		row := func(id int64, u string, n int64) []codec.Column {
			return []codec.Column{icol("id", id, pk), scol("u", u), icol("n", n, codec.FlagNullable)}
		}
		e.run([]*codec.Event{
			ddlEv(9, e.schema, "um", codec.ActionCreateTable, "CREATE TABLE um (id BIGINT NOT NULL, u VARCHAR(8) COLLATE utf8mb4_bin NULL, n BIGINT NULL, PRIMARY KEY (id), UNIQUE KEY uu (u))"),
			rowEv(10, e.schema, "um", nil, row(46, "b", 1)),
			rowEv(10, e.schema, "um", nil, row(7, "x", 1)),
		}, nil)
		s := e.open(nil)
		ctx := context.Background()
		tx, err := s.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := false
		defer func() {
			if !done {
				tx.Rollback() // the schema's cleanup waits on its locks
			}
		}()
		table := apply.Table{Schema: e.schema, Name: "um"}
		parts := [][]*codec.Event{
			{
				rowEv(11, e.schema, "um", row(46, "b", 1), row(46, "b", 2)),
				rowEv(11, e.schema, "um", row(7, "x", 1), row(7, "x", 2)),
				rowEv(12, e.schema, "um", nil, row(21, "b", 0)),
			},
			{rowEv(12, e.schema, "um", row(46, "b", 2), row(46, "a2", 2))},
		}
		for i, part := range parts {
			var rows []*codec.RowChange
			for _, ev := range part {
				rows = append(rows, &ev.Row)
			}
			if err := tx.ApplyRows(ctx, table, rows); err != nil {
				t.Fatalf("part %d: %v", i, err)
			}
		}
		done = true
		if err := tx.Commit(ctx, []apply.Mark{{Table: table, CommitTs: 12}}); err != nil {
			t.Fatal(err)
		}
		if got, want := e.dump("um"), []string{"21|b|0", "46|a2|2", "7|x|2"}; !slices.Equal(got, want) {
			t.Fatalf("um holds %q, want %q", got, want)
		}
	})
}

// TestKeylessUniqueSwapInParts: a table without a key but with a unique
// index (on a column that may be NULL, so no key) is no multiset. Two rows
// swapping their unique values in one commit ts, handed out in parts of one
// row, lost a row on every sink, the run a success: the first part's insert
// of "b" replaced the row holding it, and the second part's delete of "b"
// took the inserted row. Such a commit ts now goes whole; here, one that
// turns out so after a part went out fails as split too late, and the
// rerun holding it whole (apply.HoldWhole, as redokit apply does) is exact.
// Found by the differential fuzzer (seed 12094).
func TestKeylessUniqueSwapInParts(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		// One column, as the fuzzer's table had: a delete matches a row by
		// its whole image, which here is its unique value.
		ucol := func(v string) []codec.Column {
			c := scol("u", v)
			c.Flags |= codec.FlagUniqueKey
			return []codec.Column{c}
		}
		evs := []*codec.Event{
			ddlEv(9, e.schema, "ku", codec.ActionCreateTable, "CREATE TABLE ku (u VARCHAR(8) COLLATE utf8mb4_bin NULL, UNIQUE KEY uu (u))"),
			rowEv(10, e.schema, "ku", nil, ucol("a")),
			rowEv(10, e.schema, "ku", nil, ucol("b")),
			rowEv(10, e.schema, "ku", nil, ucol("c")),
			rowEv(11, e.schema, "ku", ucol("a"), ucol("b")),
			rowEv(11, e.schema, "ku", nil, ucol("d")),
			rowEv(11, e.schema, "ku", ucol("b"), ucol("a")),
		}
		s := e.open(nil)
		o := &apply.Options{BatchRows: 1, TxnRows: 1, SplitBytes: 1}
		for attempt := 0; ; attempt++ {
			_, err := apply.Run(context.Background(), sliceSource(evs), s, o)
			if err == nil {
				break
			}
			next, late := apply.HoldWhole(o, err)
			if next == nil || attempt > 2 {
				t.Fatalf("Run: %v", err)
			}
			t.Logf("rerun: %v", late)
			o = next
		}
		if got, want := e.dump("ku"), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
			t.Fatalf("ku holds %q, want %q", got, want)
		}
	})
}
