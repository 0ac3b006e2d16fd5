package sqlsink_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// With the downstream's foreign-key checks kept on, a child must never reach
// the database before its parent, nor a parent's delete before its
// children's: Run keeps commit-ts order across tables, and the order of the
// tables inside each upstream transaction.
func TestForeignKeyChecksKeepOrder(t *testing.T) {
	// MariaDB enforces the keys as the DDL declares them; the SQLite
	// rewrite's handling of REFERENCES is the SQLite sink's own test's.
	func(t *testing.T, e *env) {
		var evs []*codec.Event
		evs = append(evs,
			ddlEv(5, e.schema, "a", codec.ActionCreateTable, "CREATE TABLE a (id BIGINT PRIMARY KEY)"),
			ddlEv(6, e.schema, "b", codec.ActionCreateTable, "CREATE TABLE b (id BIGINT PRIMARY KEY, a BIGINT, FOREIGN KEY (a) REFERENCES a (id))"),
			ddlEv(7, e.schema, "c", codec.ActionCreateTable, "CREATE TABLE c (id BIGINT PRIMARY KEY, b BIGINT, FOREIGN KEY (b) REFERENCES b (id))"))
		ts := uint64(10)
		for i := range int64(50) {
			ts++
			// One upstream transaction: a, then b, then c.
			evs = append(evs,
				rowEv(ts, e.schema, "a", nil, []codec.Column{icol("id", i, pk)}),
				rowEv(ts, e.schema, "b", nil, []codec.Column{icol("id", i, pk), icol("a", i, 0)}),
				rowEv(ts, e.schema, "c", nil, []codec.Column{icol("id", i, pk), icol("b", i, 0)}))
		}
		for i := range int64(25) {
			ts++
			// The reverse: children first.
			evs = append(evs,
				rowEv(ts, e.schema, "c", []codec.Column{icol("id", i, pk), icol("b", i, 0)}, nil),
				rowEv(ts, e.schema, "b", []codec.Column{icol("id", i, pk), icol("a", i, 0)}, nil),
				rowEv(ts, e.schema, "a", []codec.Column{icol("id", i, pk)}, nil))
		}
		s := e.open(&apply.SinkOptions{ForeignKeyChecks: true})
		if _, err := apply.Run(context.Background(), sliceSource(evs), s, &apply.Options{Workers: 4, BatchRows: 1}); err != nil {
			t.Fatalf("Run with foreign-key checks on: %v", err)
		}
		for _, tb := range []string{"a", "b", "c"} {
			if got := e.dump(tb); len(got) != 25 {
				t.Errorf("table %s holds %d rows, want 25", tb, len(got))
			}
		}
		var checks int
		if err := e.admin.QueryRow(fmt.Sprintf("SELECT count(*) FROM information_schema.referential_constraints WHERE constraint_schema = '%s'", e.schema)).Scan(&checks); err != nil || checks != 2 {
			t.Errorf("foreign keys downstream: %d (%v), want 2", checks, err)
		}
	}(t, newEnv(t, sqlsink.MySQL))
}
