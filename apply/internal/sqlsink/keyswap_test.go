package sqlsink_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// Issue 27, finding 5: a key swap inside one transaction left a ghost row on
// every sink. A log gives the row changes of one upstream transaction in one
// of two shapes: each row's final state (TiDB: `UPDATE t SET k = 3 - k` is
// update 1→2 and update 2→1, each pre image the row before the
// transaction), or every statement's change in order (a binlog: the same
// row may change twice, a pre image is the row as the transaction's earlier
// changes left it; a swap goes through a spare key). The sink deleted every
// pre image's key and then upserted every post image, so the second shape
// kept the row at the spare key, or the row moved away and back. Every case
// below must end with exactly the rows the transaction leaves, in both
// shapes, on every sink, whatever the batching, and with the foreign-key
// checks on (the group path).

type swapCase struct {
	name    string
	initial [][2]any      // (k, v) rows inserted at ts 10
	changes [][][2][2]any // per commit ts from 11: (pre, post) with nil for none
	want    []string
}

func kv(k int64, v string) [2]any { return [2]any{k, v} }

var none = [2]any{}

var swapCases = []swapCase{
	{
		name:    "swap-final-state",
		initial: [][2]any{kv(1, "a"), kv(2, "b")},
		changes: [][][2][2]any{{{kv(1, "a"), kv(2, "a")}, {kv(2, "b"), kv(1, "b")}}},
		want:    []string{"1|b", "2|a"},
	},
	{
		name:    "swap-final-state-reversed",
		initial: [][2]any{kv(1, "a"), kv(2, "b")},
		changes: [][][2][2]any{{{kv(2, "b"), kv(1, "b")}, {kv(1, "a"), kv(2, "a")}}},
		want:    []string{"1|b", "2|a"},
	},
	{
		// Identical values: the two readings of the changes agree only
		// when neither row is dropped.
		name:    "swap-final-state-same-values",
		initial: [][2]any{kv(1, "a"), kv(2, "a")},
		changes: [][][2][2]any{{{kv(1, "a"), kv(2, "a")}, {kv(2, "a"), kv(1, "a")}}},
		want:    []string{"1|a", "2|a"},
	},
	{
		// `UPDATE t SET k = 3 - k` twice in one transaction, as a binlog
		// gives it: the row moves to 2 and back.
		name:    "move-and-back",
		initial: [][2]any{kv(1, "a")},
		changes: [][][2][2]any{{{kv(1, "a"), kv(2, "a")}, {kv(2, "a"), kv(1, "a")}}},
		want:    []string{"1|a"},
	},
	{
		// A swap as MySQL runs it, through a spare key, in one transaction.
		name:    "swap-through-spare-key",
		initial: [][2]any{kv(1, "a"), kv(2, "b")},
		changes: [][][2][2]any{{{kv(1, "a"), kv(3, "a")}, {kv(2, "b"), kv(1, "b")}, {kv(3, "a"), kv(2, "a")}}},
		want:    []string{"1|b", "2|a"},
	},
	{
		name:    "rotation-final-state",
		initial: [][2]any{kv(1, "a"), kv(2, "b"), kv(3, "c")},
		changes: [][][2][2]any{{{kv(2, "b"), kv(3, "b")}, {kv(1, "a"), kv(2, "a")}, {kv(3, "c"), kv(1, "c")}}},
		want:    []string{"1|c", "2|a", "3|b"},
	},
	{
		name:    "rotation-through-spare-key",
		initial: [][2]any{kv(1, "a"), kv(2, "b"), kv(3, "c")},
		changes: [][][2][2]any{{{kv(1, "a"), kv(9, "a")}, {kv(3, "c"), kv(1, "c")}, {kv(2, "b"), kv(3, "b")}, {kv(9, "a"), kv(2, "a")}}},
		want:    []string{"1|c", "2|a", "3|b"},
	},
	{
		// A swap across two commit ts of one batch: to the spare key in
		// one transaction, the rest in the next.
		name:    "swap-across-two-commit-ts",
		initial: [][2]any{kv(1, "a"), kv(2, "b")},
		changes: [][][2][2]any{
			{{kv(1, "a"), kv(3, "a")}},
			{{kv(2, "b"), kv(1, "b")}, {kv(3, "a"), kv(2, "a")}},
		},
		want: []string{"1|b", "2|a"},
	},
	{
		name:    "swap-across-two-commit-ts-final-state",
		initial: [][2]any{kv(1, "a"), kv(2, "b")},
		changes: [][][2][2]any{
			{{kv(1, "a"), kv(2, "a")}, {kv(2, "b"), kv(1, "b")}},
			{{kv(2, "a"), kv(1, "a")}, {kv(1, "b"), kv(2, "b")}},
		},
		want: []string{"1|a", "2|b"},
	},
	{
		// Statement by statement: an insert, two updates and a delete of
		// one row, and an insert and an update of another.
		name:    "statements-in-order",
		initial: [][2]any{kv(1, "a")},
		changes: [][][2][2]any{{
			{none, kv(5, "x")}, {kv(5, "x"), kv(5, "y")}, {kv(5, "y"), kv(6, "y")}, {kv(6, "y"), none},
			{none, kv(7, "p")}, {kv(7, "p"), kv(7, "q")},
			{kv(1, "a"), kv(1, "b")}, {kv(1, "b"), kv(1, "c")},
		}},
		want: []string{"1|c", "7|q"},
	},
	{
		// Deleted and inserted again in one transaction.
		name:    "delete-and-insert-again",
		initial: [][2]any{kv(1, "a")},
		changes: [][][2][2]any{{{kv(1, "a"), none}, {none, kv(1, "z")}}},
		want:    []string{"1|z"},
	},
}

// swapRow is a row of table sw: k the key, v text.
func swapRow(c [2]any) []codec.Column {
	if c[0] == nil {
		return nil
	}
	return []codec.Column{icol("k", c[0].(int64), pk), scol("v", c[1].(string))}
}

func swapEvents(schema string, c swapCase) []*codec.Event {
	evs := []*codec.Event{ddlEv(9, schema, "sw", codec.ActionCreateTable, "CREATE TABLE sw (k BIGINT PRIMARY KEY, v VARCHAR(8))")}
	for _, r := range c.initial {
		evs = append(evs, rowEv(10, schema, "sw", nil, swapRow(r)))
	}
	for i, tx := range c.changes {
		for _, ch := range tx {
			evs = append(evs, rowEv(11+uint64(i), schema, "sw", swapRow(ch[0]), swapRow(ch[1])))
		}
	}
	return evs
}

func TestKeySwapInOneTransaction(t *testing.T) {
	type mode struct {
		name string
		o    *apply.Options
		so   *apply.SinkOptions
		// split: every commit ts goes in parts of a row each
		// (apply.CommitTsSplitter), as far as it may: one that turns out
		// to need applying whole fails with apply.ErrSplitTooLate,
		// committing none of it, and a rerun that holds it whole ends as
		// one run would.
		split bool
	}
	modes := []mode{
		{"defaults", nil, nil, false},
		{"batch-per-ts", &apply.Options{Workers: 1, BatchRows: 1, TxnRows: 1}, nil, false},
		{"two-row-statements", nil, &apply.SinkOptions{MaxStatementRows: 2}, false},
		{"foreign-key-checks", nil, &apply.SinkOptions{ForeignKeyChecks: true}, false},
		{"split-every-row", &apply.Options{BatchRows: 1, TxnRows: 1, SplitBytes: 1}, nil, true},
	}
	for _, d := range allDialects {
		tooLate, ran := 0, 0
		t.Run(d.String(), func(t *testing.T) {
			defer func() {
				// Every case moves keys: split a row at a time, each
				// goes in parts until the move after a write. (Outside
				// CI a dialect without its server skips every case.)
				if tooLate == 0 && ran > 0 && !t.Failed() && !t.Skipped() {
					t.Errorf("no case failed as split too late: every one moves keys after writing some")
				}
			}()
			for _, c := range swapCases {
				for _, m := range modes {
					t.Run(c.name+"/"+m.name, func(t *testing.T) {
						e := newEnv(t, d)
						ran++
						s := e.open(m.so)
						_, err := apply.Run(context.Background(), sliceSource(swapEvents(e.schema, c)), s, m.o)
						if m.split && errors.Is(err, apply.ErrSplitTooLate) {
							tooLate++
							_, err = apply.Run(context.Background(), sliceSource(swapEvents(e.schema, c)), s, nil)
						}
						if err != nil {
							t.Fatalf("Run: %v", err)
						}
						if got := e.dump("sw"); !slices.Equal(got, c.want) {
							t.Errorf("sw = %q, want %q", got, c.want)
						}
						if got := s.Conflicts(); got.Replaced != 0 || got.DeletesMissed != 0 {
							t.Errorf("conflicts %+v on a legal log over its own rows, want none", got)
						}
					})
				}
			}
		})
	}
}

// A keyless table, statement by statement: a row inserted and deleted again
// in one transaction is no change, and an identical row that was there
// before stays.
func TestKeylessStatementsInOneTransaction(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		row := func(a int64, v string) []codec.Column { return []codec.Column{klInt("a", a), scol("v", v)} }
		evs := []*codec.Event{
			ddlEv(9, e.schema, "kt", codec.ActionCreateTable, "CREATE TABLE kt (a BIGINT, v VARCHAR(8))"),
			rowEv(10, e.schema, "kt", nil, row(1, "x")),
			rowEv(11, e.schema, "kt", nil, row(1, "x")),
			rowEv(11, e.schema, "kt", row(1, "x"), nil),
			rowEv(11, e.schema, "kt", nil, row(2, "y")),
			rowEv(11, e.schema, "kt", row(2, "y"), row(2, "z")),
		}
		s := e.open(nil)
		if _, err := apply.Run(context.Background(), sliceSource(evs), s, nil); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if got, want := e.dump("kt"), []string{"1|x", "2|z"}; !slices.Equal(got, want) {
			t.Errorf("kt = %q, want %q", got, want)
		}
		if got := s.Conflicts(); got.DeletesMissed != 0 {
			t.Errorf("conflicts %+v, want none", got)
		}
	})
}
