package difffuzz_test

import (
	"context"
	"slices"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/difffuzz"
	"github.com/redokit/redokit/apply/internal/sqlsink"
)

// The comparison must see a downstream that differs from the model in one
// cell, one row too many or too few, or one column: a history is applied
// to SQLite, then the downstream is changed behind the sink's back.
func TestComparisonCatchesTampering(t *testing.T) {
	f := newFuzzer(t, sqlsink.SQLite)
	tampers := []struct {
		name string
		sql  func(tb *difffuzz.Table) string
	}{
		{"one cell", func(tb *difffuzz.Table) string {
			return "UPDATE " + q(tb.Name) + " SET " + q(tb.Cols[len(tb.Cols)-1].Name) + " = 'tampered' WHERE rowid = (SELECT min(rowid) FROM " + q(tb.Name) + ")"
		}},
		{"a row gone", func(tb *difffuzz.Table) string {
			return "DELETE FROM " + q(tb.Name) + " WHERE rowid = (SELECT min(rowid) FROM " + q(tb.Name) + ")"
		}},
		{"a row more", func(tb *difffuzz.Table) string {
			return "INSERT INTO " + q(tb.Name) + " SELECT * FROM " + q(tb.Name) + " WHERE rowid = (SELECT min(rowid) FROM " + q(tb.Name) + ")"
		}},
		{"a column more", func(tb *difffuzz.Table) string {
			return "ALTER TABLE " + q(tb.Name) + " ADD COLUMN tampered TEXT"
		}},
	}
	for _, tc := range tampers {
		t.Run(tc.name, func(t *testing.T) {
			// A history whose end holds a table with rows and no key
			// (a row more is then legal SQL).
			for seed := uint64(1); seed < 200; seed++ {
				h := difffuzz.Generate(seed)
				h.Steps = []difffuzz.Step{{Kind: difffuzz.StepCreate, Seed: seed}, {Kind: difffuzz.StepBigTxn, Seed: seed}}
				b := h.Build("db")
				var tb *difffuzz.Table
				for _, x := range b.Tables {
					if len(x.Rows) > 0 && !x.Tree && len(x.Idx) == 0 {
						tb = x
					}
				}
				if tb == nil {
					continue
				}
				ds, err := f.newDownstream("db")
				if err != nil {
					t.Fatal(err)
				}
				defer ds.drop()
				s, err := ds.open("", false)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := apply.Run(context.Background(), apply.SliceSource(b.Events), s, nil); err != nil {
					t.Fatal(err)
				}
				s.Close()
				st := stats{refusals: map[string]int{}}
				if d := f.compare(ds, b, apply.Conflicts{}, &st); d != "" {
					t.Fatalf("seed %d before tampering: %s", seed, d)
				}
				if _, err := ds.db.Exec(tc.sql(tb)); err != nil {
					t.Fatal(err)
				}
				if d := f.compare(ds, b, apply.Conflicts{}, &st); d == "" {
					t.Fatalf("seed %d: %s went unseen", seed, tc.name)
				}
				return
			}
			t.Fatal("no seed made a table with rows and no index")
		})
	}
}

func q(name string) string { return `"` + name + `"` }

// The shrinker keeps exactly the steps a divergence needs: here, a
// divergence that needs two given steps of a long history, in order.
func TestShrinkToMinimal(t *testing.T) {
	h := difffuzz.Generate(7)
	if len(h.Steps) < 10 {
		t.Fatalf("history 7 has %d steps", len(h.Steps))
	}
	a, b := h.Steps[2], h.Steps[len(h.Steps)-3]
	checks := 0
	check := func(c *difffuzz.History) string {
		checks++
		i, j := slices.Index(c.Steps, a), slices.Index(c.Steps, b)
		if i >= 0 && j > i {
			return "diverges"
		}
		return ""
	}
	min, res := shrink(h, check(h), check)
	if res != "diverges" || !slices.Equal(min.Steps, []difffuzz.Step{a, b}) {
		t.Fatalf("shrunk to %v (%q), want %v", min.Steps, res, []difffuzz.Step{a, b})
	}
	if min.Workers != 1 || min.BatchRows != 1 || min.TxnRows != 1 {
		t.Errorf("options %d/%d/%d, want the simplest 1/1/1", min.Workers, min.BatchRows, min.TxnRows)
	}
	t.Logf("%d steps shrunk to 2 in %d checks", len(h.Steps), checks)
}
