package sqlsink_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Two logs into one downstream (issue 15). The progress table had no log
// ID: a second log whose commit ts are below the first's was skipped as
// "already applied", entirely and silently. The progress is now kept per
// log (SinkOptions.LogID) and per apply of a log (SinkName); a second log
// needs SinkOptions.AnotherLog, and without it Run fails naming the logs.

// The IDs are long enough that an error naming one cannot do so by chance.
const (
	twoLogA = "log-alpha-7f3a"
	twoLogB = "log-beta-91c2"
	twoLogC = "log-gamma-55d0"
)

func twoIns(ts uint64, schema, table string, id int64, v string) *codec.Event {
	return rowEv(ts, schema, table, nil, []codec.Column{icol("id", id, pk), scol("v", v)})
}

const twoDDL = " (id INT NOT NULL PRIMARY KEY, v VARCHAR(16))"

// twoLogsAB returns log A (table t, commit ts 100–105) and log B (table u
// created at 40, and rows of t and u at 41–51: below every commit ts of A).
func twoLogsAB(schema string) (a, b []*codec.Event) {
	a = []*codec.Event{ddlEv(100, schema, "t", codec.ActionCreateTable, "CREATE TABLE t"+twoDDL)}
	for i := int64(1); i <= 5; i++ {
		a = append(a, twoIns(100+uint64(i), schema, "t", i, "a"))
	}
	b = []*codec.Event{
		ddlEv(40, schema, "u", codec.ActionCreateTable, "CREATE TABLE u"+twoDDL),
		twoIns(41, schema, "u", 1, "b"),
		twoIns(41, schema, "u", 2, "b"),
		twoIns(50, schema, "t", 101, "b"),
		twoIns(51, schema, "t", 102, "b"),
	}
	return a, b
}

var (
	twoWantTA  = []string{"1|a", "2|a", "3|a", "4|a", "5|a"}
	twoWantTAB = []string{"101|b", "102|b", "1|a", "2|a", "3|a", "4|a", "5|a"}
	twoWantU   = []string{"1|b", "2|b"}
)

func (e *env) twoCheckDump(table string, want []string) {
	e.t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := e.dump(table); !slices.Equal(got, want) {
		e.t.Errorf("%s = %q, want %q", table, got, want)
	}
}

// checkAllSkipped checks that a re-apply skipped every event and wrote
// nothing.
func twoAllSkipped(t *testing.T, what string, res *apply.Result, events []*codec.Event) {
	t.Helper()
	if res.Skipped != int64(len(events)) || res.Rows != 0 || res.DDLs != 0 {
		t.Errorf("%s: %+v, want all %d events skipped", what, res, len(events))
	}
}

func TestTwoLogs(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e0 *env) {
		t.Run("another-log-allowed", func(t *testing.T) {
			e := newEnv(t, e0.dialect)
			a, b := twoLogsAB(e.schema)
			soA := &apply.SinkOptions{LogID: twoLogA}
			if res := e.i15MustApply(soA, a, nil); res.Rows != 5 || res.DDLs != 1 || res.Skipped != 0 {
				t.Fatalf("apply A: %+v", res)
			}
			// A again, alone in the downstream: exactly once.
			twoAllSkipped(t, "re-apply A", e.i15MustApply(soA, a, nil), a)

			res := e.i15MustApply(&apply.SinkOptions{LogID: twoLogB, AnotherLog: true}, b, nil)
			if res.Skipped != 0 || res.Rows != 4 || res.DDLs != 1 {
				t.Errorf("apply B after A: %+v, want 4 rows and 1 DDL applied, none skipped (B's commit ts are below A's, and B is another log)", res)
			}
			e.twoCheckDump("t", twoWantTAB)
			e.twoCheckDump("u", twoWantU)

			// Each log's progress is its own: re-applying either skips
			// all of it.
			twoAllSkipped(t, "re-apply A after B", e.i15MustApply(&apply.SinkOptions{LogID: twoLogA, AnotherLog: true}, a, nil), a)
			twoAllSkipped(t, "re-apply B", e.i15MustApply(&apply.SinkOptions{LogID: twoLogB, AnotherLog: true}, b, nil), b)
			e.twoCheckDump("t", twoWantTAB)
			e.twoCheckDump("u", twoWantU)
		})

		t.Run("another-log-refused", func(t *testing.T) {
			e := newEnv(t, e0.dialect)
			a, b := twoLogsAB(e.schema)
			e.i15MustApply(&apply.SinkOptions{LogID: twoLogA}, a, nil)
			res, err := e.i15Apply(&apply.SinkOptions{LogID: twoLogB}, b, nil)
			if err == nil {
				t.Fatalf("apply of log B into a downstream holding log A without AnotherLog: no error (result %+v)", res)
			}
			if !strings.Contains(err.Error(), twoLogA) || !strings.Contains(err.Error(), twoLogB) {
				t.Errorf("error %q does not name both logs, %s (the downstream's) and %s (the one applied)", err, twoLogA, twoLogB)
			}
			if res != nil && (res.Rows != 0 || res.DDLs != 0) {
				t.Errorf("refused apply wrote: %+v", res)
			}
			// Nothing of B is there, and A is whole.
			e.twoCheckDump("t", twoWantTA)
			if e.exists("u") {
				t.Errorf("table u of the refused log B exists")
			}
			twoAllSkipped(t, "re-apply A", e.i15MustApply(&apply.SinkOptions{LogID: twoLogA}, a, nil), a)
		})

		t.Run("sink-name", func(t *testing.T) {
			// Two applies of one log, each with its own share of it (a
			// table filter): the second's events are below the first's
			// commit ts, the DDL included, and must not be skipped.
			e := newEnv(t, e0.dialect)
			s := e.schema
			if e.dialect == sqlsink.SQLite {
				e.exec("CREATE TABLE " + e.table("shared") + " (id INTEGER NOT NULL PRIMARY KEY, v TEXT)")
			} else {
				e.exec("CREATE TABLE " + e.table("shared") + twoDDL)
			}
			s1 := []*codec.Event{
				ddlEv(12, s, "t1", codec.ActionCreateTable, "CREATE TABLE t1"+twoDDL),
				twoIns(13, s, "t1", 1, "s1"),
				twoIns(20, s, "shared", 1, "s1"),
			}
			s2 := []*codec.Event{
				ddlEv(11, s, "t2", codec.ActionCreateTable, "CREATE TABLE t2"+twoDDL),
				twoIns(14, s, "t2", 1, "s2"),
				twoIns(15, s, "shared", 2, "s2"),
			}
			so1 := &apply.SinkOptions{LogID: twoLogC, SinkName: "s1"}
			so2 := &apply.SinkOptions{LogID: twoLogC, SinkName: "s2"}
			e.i15MustApply(so1, s1, nil)
			res, err := e.i15Apply(so2, s2, nil)
			if err != nil {
				t.Fatalf("apply as sink s2 after s1: %v", err)
			}
			if res.Skipped != 0 || res.Rows != 2 || res.DDLs != 1 {
				t.Errorf("apply as sink s2 after s1: %+v, want 2 rows and 1 DDL applied, none skipped", res)
			}
			e.twoCheckDump("t1", []string{"1|s1"})
			e.twoCheckDump("t2", []string{"1|s2"})
			e.twoCheckDump("shared", []string{"1|s1", "2|s2"})
			twoAllSkipped(t, "re-apply s1", e.i15MustApply(so1, s1, nil), s1)
			twoAllSkipped(t, "re-apply s2", e.i15MustApply(so2, s2, nil), s2)
			e.twoCheckDump("shared", []string{"1|s1", "2|s2"})
		})
	})
}
