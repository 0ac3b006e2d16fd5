package sqlsink_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// Issue 27, finding 4: a replay over a downstream that ran ahead of it (the
// downstream's own sink applied past the log's checkpoint before the
// disaster, and the replay starts at the checkpoint). Keyed tables end
// exact; a table without a key cannot tell a replayed insert from a second
// identical one, so where the sink's progress cannot tell either (the rows
// were written by something else) each such insert is counted
// (DuplicatedKeyless), per table; PostgreSQL meets a stale row holding a
// unique value outside the batch and replaces it, as MySQL and SQLite do,
// counted (Replaced), instead of stopping with 23505; a replay over the
// sink's own progress skips what it recorded, and says so per table.

// aheadLog is a log of two tables: uq (id key, u unique) and kl (no key).
// The downstream ran ahead to aheadTs; the checkpoint the replay starts
// after is aheadFrom.
const (
	aheadFrom = 15
	aheadTs   = 30
)

func aheadEvents(schema string) []*codec.Event {
	uq := func(id int64, u string) []codec.Column {
		c := scol("u", u)
		c.Flags = codec.FlagUniqueKey | codec.FlagNullable
		c.Collation = "utf8mb4_bin"
		return []codec.Column{icol("id", id, pk), c}
	}
	kl := func(a int64) []codec.Column { return []codec.Column{klInt("a", a), scol("v", "x")} }
	return []*codec.Event{
		ddlEv(9, schema, "uq", codec.ActionCreateTable, "CREATE TABLE uq (id BIGINT PRIMARY KEY, u VARCHAR(8) COLLATE utf8mb4_bin, UNIQUE KEY uu (u))"),
		ddlEv(9, schema, "kl", codec.ActionCreateTable, "CREATE TABLE kl (a BIGINT, v VARCHAR(8))"),
		rowEv(10, schema, "uq", nil, uq(1, "a")),
		rowEv(11, schema, "kl", nil, kl(1)),
		// After the checkpoint, applied downstream before the disaster:
		rowEv(16, schema, "kl", nil, kl(2)),
		rowEv(18, schema, "kl", nil, kl(3)),
		// Row 3 takes 'w', gives it up, row 4 takes it: over the
		// downstream's end state, row 3's insert meets row 4, stale.
		rowEv(20, schema, "uq", nil, uq(3, "w")),
		rowEv(21, schema, "kl", nil, kl(2)),
		rowEv(22, schema, "uq", uq(3, "w"), uq(3, "v")),
		rowEv(23, schema, "kl", kl(3), nil),
		rowEv(24, schema, "uq", nil, uq(4, "w")),
		rowEv(aheadTs, schema, "uq", uq(1, "a"), uq(1, "b")),
		// Not applied downstream before the disaster:
		rowEv(35, schema, "kl", nil, kl(4)),
		rowEv(36, schema, "uq", nil, uq(5, "z")),
	}
}

// since returns the events above ts: a replay from a checkpoint.
func since(evs []*codec.Event, ts uint64) []*codec.Event {
	var out []*codec.Event
	for _, ev := range evs {
		if ev.CommitTs() > ts {
			out = append(out, ev)
		}
	}
	return out
}

func upTo(evs []*codec.Event, ts uint64) []*codec.Event {
	var out []*codec.Event
	for _, ev := range evs {
		if ev.CommitTs() <= ts {
			out = append(out, ev)
		}
	}
	return out
}

var (
	aheadUq = []string{"1|b", "3|v", "4|w", "5|z"}
	// The keyless rows the log leaves: 1, 2, 2, 4. The replay inserts 2
	// and 2 again over a downstream that held them (and 3, which the
	// downstream had deleted already, and deletes it again).
	aheadKl        = []string{"1|x", "2|x", "2|x", "4|x"}
	aheadKlReplay  = []string{"1|x", "2|x", "2|x", "2|x", "2|x", "4|x"}
	aheadKlDoubled = int64(2)
)

func TestReplayOverDownstreamAhead(t *testing.T) {
	type mode struct {
		name string
		o    *apply.Options
	}
	for _, m := range []mode{{"batch-per-ts", &apply.Options{Workers: 1, BatchRows: 1, TxnRows: 1}}, {"defaults", nil}} {
		for _, d := range allDialects {
			t.Run(m.name+"/"+d.String(), func(t *testing.T) {
				e := newEnv(t, d)
				ctx := context.Background()
				evs := aheadEvents(e.schema)
				// The downstream's own sink: it records its progress
				// elsewhere (or nowhere), and ran to aheadTs.
				other := e.open(&apply.SinkOptions{ProgressTable: "its_own_progress"})
				if _, err := apply.Run(ctx, sliceSource(upTo(evs, aheadTs)), other, nil); err != nil {
					t.Fatalf("the downstream's own apply: %v", err)
				}
				// The recovery: from the checkpoint, to the end.
				s := e.open(nil)
				res, err := apply.Run(ctx, sliceSource(since(evs, aheadFrom)), s, m.o)
				if err != nil {
					t.Fatalf("replay over the downstream ahead: %v", err)
				}
				if got := e.dump("uq"); !slices.Equal(got, aheadUq) {
					t.Errorf("uq = %q, want %q", got, aheadUq)
				}
				if got := e.dump("kl"); !slices.Equal(got, aheadKlReplay) {
					t.Errorf("kl = %q, want %q (the log's %q and the two rows the replay doubled)", got, aheadKlReplay, aheadKl)
				}
				c := s.Conflicts()
				if c.DuplicatedKeyless != aheadKlDoubled {
					t.Errorf("conflicts %+v: %d keyless rows duplicated, want %d", c, c.DuplicatedKeyless, aheadKlDoubled)
				}
				kl := tableConflicts(c, e.schema, "kl")
				if kl.DuplicatedKeyless != aheadKlDoubled || kl.Replaced != 0 {
					t.Errorf("conflicts of kl %+v, want %d duplicated", kl, aheadKlDoubled)
				}
				uq := tableConflicts(c, e.schema, "uq")
				if m.o != nil && uq.Replaced != 1 {
					// Per commit ts, row 3's insert meets row 4; a
					// batch of them collapses row 3 away.
					t.Errorf("conflicts of uq %+v, want 1 replaced", uq)
				}
				if uq.DuplicatedKeyless != 0 {
					t.Errorf("conflicts of uq %+v", uq)
				}
				if res.Skipped != 0 {
					t.Errorf("skipped %d, want 0: the sink's own progress recorded nothing", res.Skipped)
				}

				// A rerun over the replay's own progress skips everything,
				// and says so per table; nothing is doubled again.
				s2 := e.open(nil)
				res, err = apply.Run(ctx, sliceSource(since(evs, aheadFrom)), s2, m.o)
				if err != nil {
					t.Fatalf("rerun: %v", err)
				}
				if got := e.dump("kl"); !slices.Equal(got, aheadKlReplay) {
					t.Errorf("after the rerun kl = %q, want %q", got, aheadKlReplay)
				}
				if res.Rows != 0 || res.SkippedRows[apply.Table{Schema: e.schema, Name: "kl"}] != 5 || res.SkippedRows[apply.Table{Schema: e.schema, Name: "uq"}] != 5 {
					t.Errorf("rerun: %d rows applied, skipped per table %v: want none applied, 5 of each skipped", res.Rows, res.SkippedRows)
				}
				if c := s2.Conflicts(); !c.Zero() {
					t.Errorf("rerun conflicts %+v, want none", c)
				}
				report := s2.Conflicts().WithSkipped(res.SkippedRows)
				if tc := tableConflicts(report, e.schema, "kl"); tc.Skipped != 5 {
					t.Errorf("report %+v: kl skipped %d, want 5", report, tc.Skipped)
				}
			})
		}
	}
}

// A replay that resumes over its own progress checks nothing it wrote: a
// keyless table the progress records is checked once, finds no identical
// row, and counts nothing, although the log inserts identical rows.
func TestResumeKeylessNoDuplicates(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		kl := func(a int64) []codec.Column { return []codec.Column{klInt("a", a), scol("v", "x")} }
		evs := []*codec.Event{ddlEv(9, e.schema, "kl", codec.ActionCreateTable, "CREATE TABLE kl (a BIGINT, v VARCHAR(8))")}
		for ts := uint64(10); ts < 30; ts++ {
			evs = append(evs, rowEv(ts, e.schema, "kl", nil, kl(int64(ts%3))))
		}
		if _, err := apply.Run(ctx, sliceSource(upTo(evs, 19)), e.open(nil), nil); err != nil {
			t.Fatal(err)
		}
		s := e.open(nil)
		res, err := apply.Run(ctx, sliceSource(evs), s, &apply.Options{Workers: 1, BatchRows: 1, TxnRows: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(e.dump("kl")); got != 20 || res.Rows != 10 {
			t.Errorf("kl holds %d rows after %d applied, want 20 after 10", got, res.Rows)
		}
		if c := s.Conflicts(); !c.Zero() {
			t.Errorf("conflicts %+v, want none: every row there is the apply's own", c)
		}
	})
}

// With foreign-key checks on, a stale row holding a unique value is not
// deleted: the apply stops, naming the table and why — on every sink.
func TestReplayOverDownstreamAheadForeignKeyChecks(t *testing.T) {
	forEachDialect(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		evs := aheadEvents(e.schema)
		if _, err := apply.Run(ctx, sliceSource(upTo(evs, aheadTs)), e.open(&apply.SinkOptions{ProgressTable: "its_own_progress"}), nil); err != nil {
			t.Fatal(err)
		}
		s := e.open(&apply.SinkOptions{ForeignKeyChecks: true})
		_, err := apply.Run(ctx, sliceSource(since(evs, aheadFrom)), s, &apply.Options{BatchRows: 1, TxnRows: 1})
		var se *apply.StatementError
		if !errors.As(err, &se) || se.Table.Name != "uq" || !strings.Contains(err.Error(), "foreign-key checks on") {
			t.Fatalf("Run: %v, want a duplicate-key StatementError naming uq and the foreign-key checks", err)
		}
		if got := e.dump("uq"); !slices.Contains(got, "4|w") {
			t.Errorf("uq = %q: the stale row 4 was deleted", got)
		}
	})
}

// Unique values moving between the rows a transaction changes are no
// conflict: nothing is counted as replaced (MySQL and SQLite counted their
// REPLACE), on every sink, however the rows are batched.
func TestUniqueMovesNoConflict(t *testing.T) {
	uq := func(id int64, u string) []codec.Column {
		c := scol("u", u)
		c.Flags = codec.FlagUniqueKey | codec.FlagNullable
		c.Collation = "utf8mb4_bin"
		return []codec.Column{icol("id", id, pk), c}
	}
	for _, d := range allDialects {
		for i, o := range []*apply.Options{nil, {Workers: 1, BatchRows: 1, TxnRows: 1}} {
			t.Run(fmt.Sprintf("%s/options-%d", d, i), func(t *testing.T) {
				e := newEnv(t, d)
				evs := []*codec.Event{
					ddlEv(9, e.schema, "uq", codec.ActionCreateTable, "CREATE TABLE uq (id BIGINT PRIMARY KEY, u VARCHAR(8) COLLATE utf8mb4_bin, UNIQUE KEY uu (u))"),
					rowEv(10, e.schema, "uq", nil, uq(1, "a")),
					rowEv(10, e.schema, "uq", nil, uq(2, "b")),
					// A swap of the unique values.
					rowEv(11, e.schema, "uq", uq(1, "a"), uq(1, "b")),
					rowEv(11, e.schema, "uq", uq(2, "b"), uq(2, "a")),
					// A move to a new row.
					rowEv(12, e.schema, "uq", uq(1, "b"), uq(1, "c")),
					rowEv(12, e.schema, "uq", nil, uq(3, "b")),
				}
				s := e.open(nil)
				if _, err := apply.Run(context.Background(), sliceSource(evs), s, o); err != nil {
					t.Fatal(err)
				}
				if got, want := e.dump("uq"), []string{"1|c", "2|a", "3|b"}; !slices.Equal(got, want) {
					t.Errorf("uq = %q, want %q", got, want)
				}
				if c := s.Conflicts(); !c.Zero() {
					t.Errorf("conflicts %+v on a legal log, want none", c)
				}
			})
		}
	}
}

// tableConflicts returns the report's entry of schema.table.
func tableConflicts(c apply.Conflicts, schema, table string) apply.TableConflicts {
	for _, tc := range c.Tables {
		if tc.Schema == schema && tc.Table == table {
			return tc
		}
	}
	return apply.TableConflicts{}
}
