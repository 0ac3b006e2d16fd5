package sqlsink

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteSessionStuckSaysWhy: a transaction the session cannot roll back
// (here its connection is gone, so every ROLLBACK fails) leaves the session
// unusable, and each later begin says so, with the last ROLLBACK's error,
// instead of failing as a BEGIN "within a transaction" (or, here, as a
// closed connection) that does not say what happened.
func TestSQLiteSessionStuckSaysWhy(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := newSQLiteSession(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.begin(ctx); err != nil {
		t.Fatal(err)
	}
	l.conn.Close()
	l.rollback()
	l.mu.Unlock()
	for range 2 {
		err := l.begin(ctx)
		if err == nil || !strings.Contains(err.Error(), "could not be rolled back") || !strings.Contains(err.Error(), "connection is already closed") {
			t.Fatalf("begin after a failed rollback: %v; want the session's stuck error, with the ROLLBACK's", err)
		}
	}
}
