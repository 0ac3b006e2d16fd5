package sqlsink_test

import (
	"context"
	"testing"
	"time"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// TestCommitOutlivesCancel ends the apply's context while a COMMIT is in
// flight (a deferred trigger makes PostgreSQL's COMMIT take 600 ms): the
// COMMIT must finish and Commit report what the server did. Before the
// commit guard, pgx cut the COMMIT at the cancel: it dropped the connection
// and sent a cancel request, and Commit failed at once. Here the request
// aborts the trigger's sleep, so the server rolls back; a COMMIT already in
// its critical section (flushing its WAL record) ignores the request and
// commits, after Commit reported failure. The next Run, reading the
// progress before that commit was visible, replayed the transaction and
// doubled a keyless table's rows (TestResume under CI's load).
func TestCommitOutlivesCancel(t *testing.T) {
	e := newEnv(t, sqlsink.Postgres)
	tbl := e.table("t")
	e.exec("CREATE TABLE " + tbl + " (a BIGINT, v TEXT)")
	e.exec(`CREATE FUNCTION ` + e.dialect.Quote(e.schema) + `.slow() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(0.6); RETURN NULL; END $$`)
	e.exec("CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON " + tbl +
		" DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION " + e.dialect.Quote(e.schema) + ".slow()")
	// The sink's sessions run as replicas; this trigger fires there too.
	e.exec("ALTER TABLE " + tbl + " ENABLE ALWAYS TRIGGER slow")

	s := e.open(nil)
	table := apply.Table{Schema: e.schema, Name: "t"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tx, err := s.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ev := rowEv(10, e.schema, "t", nil, []codec.Column{icol("a", 1, codec.FlagNullable), scol("v", "x")})
	if err := tx.ApplyRows(ctx, table, []*codec.RowChange{&ev.Row}); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, cancel) // inside the trigger's sleep
	start := time.Now()
	err = tx.Commit(ctx, []apply.Mark{{Table: table, CommitTs: 10}})
	t.Logf("Commit after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if ctx.Err() == nil {
		t.Fatal("the context did not end during the COMMIT: the trigger did not slow it")
	}

	// Whatever Commit said, the server has settled by now.
	time.Sleep(time.Second)
	var n int
	if err := e.admin.QueryRow("SELECT count(*) FROM " + tbl).Scan(&n); err != nil {
		t.Fatal(err)
	}
	switch {
	case err == nil && n != 1:
		t.Fatalf("Commit succeeded, but the table holds %d rows", n)
	case err != nil && n != 0:
		t.Fatalf("Commit failed (%v), but the transaction committed: the table holds %d rows", err, n)
	case err != nil:
		t.Fatalf("Commit failed (%v) although the server could commit: a COMMIT sent must finish", err)
	}
}
