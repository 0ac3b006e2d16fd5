package sqlsink_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// With the foreign-key checks on, a table a foreign key references is
// written as is (no unit deletes, which could cascade), so a unique value
// moving between its rows stops Run on every sink: the error must say that
// this is what happened, not only blame a downstream that ran ahead or
// diverged (found by the differential fuzzer, apply/internal/difffuzz).
func TestUniqueMoveReferencedForeignKeyChecks(t *testing.T) {
	row := func(id int64, u string) []codec.Column {
		c := scol("u", u)
		c.Flags = codec.FlagUniqueKey | codec.FlagNullable
		c.Collation = "utf8mb4_bin"
		return []codec.Column{icol("id", id, pk), nullCol("parent", codec.TypeLonglong), c}
	}
	forEachDialect(t, func(t *testing.T, e *env) {
		evs := []*codec.Event{
			ddlEv(9, e.schema, "tr", codec.ActionCreateTable, "CREATE TABLE tr (id BIGINT NOT NULL PRIMARY KEY, parent BIGINT, "+
				"u VARCHAR(8) COLLATE utf8mb4_bin, UNIQUE KEY uu (u), CONSTRAINT fk_tr FOREIGN KEY (parent) REFERENCES tr (id))"),
			rowEv(10, e.schema, "tr", nil, row(1, "a")),
			rowEv(10, e.schema, "tr", nil, row(2, "b")),
			rowEv(11, e.schema, "tr", row(1, "a"), row(1, "b")),
			rowEv(11, e.schema, "tr", row(2, "b"), row(2, "a")),
		}
		_, err := apply.Run(context.Background(), sliceSource(evs), e.open(&apply.SinkOptions{ForeignKeyChecks: true}), &apply.Options{TxnRows: 1})
		var se *apply.StatementError
		if !errors.As(err, &se) || se.Table.Name != "tr" || !strings.Contains(err.Error(), "a unique value moving between rows of a table a foreign key references") {
			t.Fatalf("Run: %v, want a StatementError naming tr that says a unique value moved in a referenced table", err)
		}
		if got := e.dump("tr"); len(got) != 2 || got[0] != "1|NULL|a" || got[1] != "2|NULL|b" {
			t.Errorf("tr = %q: the failed transaction left a trace", got)
		}
	})
}
