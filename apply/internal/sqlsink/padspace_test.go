package sqlsink_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// A key of a _bin collation that changes only by trailing spaces ('1' to
// '1 ': one key to MySQL, PAD SPACE, but two to SQLite and PostgreSQL,
// which compare every byte) must move the row on every sink, whether the
// batch is one commit ts or several (found by the differential fuzzer,
// apply/internal/difffuzz: with a batch per commit ts, SQLite and
// PostgreSQL kept the old row beside the new one, exit 0).
func TestKeyMovesByTrailingSpace(t *testing.T) {
	row := func(k string, v int64) []codec.Column {
		c := scol("k", k)
		c.Flags = pk
		c.Collation = "utf8mb4_bin"
		return []codec.Column{c, icol("v", v, codec.FlagNullable)}
	}
	for i, o := range []*apply.Options{nil, {Workers: 1, BatchRows: 1, TxnRows: 1}} {
		t.Run(fmt.Sprint("options-", i), func(t *testing.T) {
			forEachDialect(t, func(t *testing.T, e *env) {
				evs := []*codec.Event{
					ddlEv(9, e.schema, "ps", codec.ActionCreateTable, "CREATE TABLE ps (k VARCHAR(8) COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, v BIGINT)"),
					rowEv(10, e.schema, "ps", nil, row("1", 1)),
					rowEv(10, e.schema, "ps", nil, row("2 ", 2)),
					rowEv(11, e.schema, "ps", row("1", 1), row("1 ", 1)),
					rowEv(12, e.schema, "ps", row("2 ", 2), row("2", 3)),
				}
				if _, err := apply.Run(context.Background(), sliceSource(evs), e.open(nil), o); err != nil {
					t.Fatal(err)
				}
				if got, want := e.dump("ps"), []string{"1 |1", "2|3"}; !slices.Equal(got, want) {
					t.Errorf("ps = %q, want %q", got, want)
				}
			})
		})
	}
}
