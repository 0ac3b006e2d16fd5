package sqlsink

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// sqliteSession is the SQLite sink's one writer: a connection held for the
// sink's life, on which it runs its transactions with BEGIN IMMEDIATE,
// COMMIT and ROLLBACK statements itself rather than through database/sql's
// Tx. That lets it keep prepared statements across transactions: database/sql
// re-prepares a statement in every Tx, and preparing a multi-row statement of
// thousands of placeholders costs SQLite as much as a fifth of the apply.
// SQLite has one writer, so nothing is lost by having one connection.
type sqliteSession struct {
	mu    sync.Mutex // held from BEGIN to COMMIT or ROLLBACK, and by each other use of conn
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	// stuck is why a transaction could not be ended (rollback): every
	// later begin fails with it, rather than as a BEGIN "within a
	// transaction" that would not say why.
	stuck error
}

// maxCachedStmts bounds the prepared statements kept: statements of a
// power-of-two number of rows (up to 10 sizes) of each shape of each table.
const maxCachedStmts = 256

func newSQLiteSession(ctx context.Context, db *sql.DB) (*sqliteSession, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return &sqliteSession{conn: conn, stmts: map[string]*sql.Stmt{}}, nil
}

// stmt returns a prepared statement for the text b, preparing and keeping
// it; finding it copies nothing (a statement of a thousand rows is tens of
// KiB of text, and copying it at every execution cost a tenth of a
// DDL-heavy apply's CPU). The caller holds mu.
func (l *sqliteSession) stmt(ctx context.Context, b []byte) (*sql.Stmt, error) {
	if st := l.stmts[string(b)]; st != nil {
		return st, nil
	}
	q := string(b)
	if len(l.stmts) >= maxCachedStmts {
		l.forget()
	}
	st, err := l.conn.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	l.stmts[q] = st
	return st, nil
}

// forget closes the prepared statements: after a DDL, or when too many.
// The caller holds mu.
func (l *sqliteSession) forget() {
	for q, st := range l.stmts {
		st.Close()
		delete(l.stmts, q)
	}
}

func (l *sqliteSession) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget()
	return l.conn.Close()
}

// begin takes the session and starts a write transaction; the lock is taken
// at BEGIN (IMMEDIATE), so a busy database fails here, before any statement.
//
// A BEGIN whose context ends as it runs may have begun the transaction
// and still report the cancellation: it is rolled back (see rollback)
// before the session is given up, or the next BEGIN would fail "within a
// transaction".
func (l *sqliteSession) begin(ctx context.Context) error {
	l.mu.Lock()
	if l.stuck != nil {
		l.mu.Unlock()
		return l.stuck
	}
	if _, err := l.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		l.rollback()
		l.mu.Unlock()
		return err
	}
	return nil
}

// end commits (or rolls back) and gives the session up. After a failed
// COMMIT it rolls back, so the session is always free again.
func (l *sqliteSession) end(ctx context.Context, commit bool) error {
	return l.endExplained(ctx, commit, nil)
}

// endExplained is end, with explain (when not nil) turning a failed
// COMMIT's error into one that says more, before the rollback: SQLite
// keeps a transaction open when its COMMIT fails on a deferred foreign key.
func (l *sqliteSession) endExplained(ctx context.Context, commit bool, explain func(error) error) error {
	defer l.mu.Unlock()
	if !commit {
		l.rollback()
		return nil
	}
	_, err := l.conn.ExecContext(ctx, "COMMIT")
	if err != nil {
		if explain != nil {
			err = explain(err)
		}
		l.rollback()
	}
	return err
}

// rollback ends a transaction, whatever the context: SQLite may already
// have rolled it back (an interrupted statement does), which is fine. A
// transaction left open would leave the session free and every later
// BEGIN failing "within a transaction" (see begin), so the end is settled
// by proof: ROLLBACK again until SQLite answers that no transaction is
// active.
func (l *sqliteSession) rollback() {
	var err error
	for range 8 {
		_, err = l.conn.ExecContext(context.Background(), "ROLLBACK")
		if err != nil && strings.Contains(err.Error(), "no transaction is active") {
			return
		}
	}
	l.stuck = fmt.Errorf("apply: sqlite: a transaction could not be rolled back (8 ROLLBACKs; the last: %v): the session is unusable, and what the transaction did is not committed", err)
}

// sqliteTx is a transaction on the session.
type sqliteTx struct {
	sqlTx
	l    *sqliteSession
	done bool
	ddls []*codec.DDL // the DDLs run in the transaction (ApplyDDL)
}

// ApplyDDL runs ddl and records mark in the transaction (apply.DDLTx): SQLite
// runs DDL transactionally, so the rows before it, it and the rows after it
// commit together, and a log with a DDL every thousand rows commits every
// Options.TxnRows rows rather than twice at each DDL.
func (t *sqliteTx) ApplyDDL(ctx context.Context, ddl *codec.DDL, mark apply.DDLMark) error {
	if t.done {
		return fmt.Errorf("apply: DDL in a finished transaction")
	}
	s := t.s
	defer s.forgetForeignKeys()
	defer s.afterDDL(ddl)
	t.ddls = append(t.ddls, ddl)
	if s.o.DryRun != nil {
		return s.dryRunDDL(ctx, t.l.conn, ddl)
	}
	var record *apply.DDLMark
	if mark != (apply.DDLMark{}) {
		record = &mark
	}
	return s.runRewritten(ctx, t.l.conn, ddl, record, drivers[s.d].Rewrite)
}

// undoDDLs forgets what the sink read of the tables of the DDLs the
// transaction ran, which its end without a commit undid.
func (t *sqliteTx) undoDDLs() {
	for _, d := range t.ddls {
		t.s.afterDDL(d)
	}
	if len(t.ddls) > 0 {
		t.s.forgetForeignKeys()
	}
	t.ddls = nil
}

func (t *sqliteTx) Commit(ctx context.Context, marks []apply.Mark) error {
	if t.done {
		return fmt.Errorf("apply: commit of a finished transaction")
	}
	t.done = true
	defer t.giveScratch()
	if t.s.o.DryRun != nil {
		return t.l.end(ctx, false)
	}
	if err := t.s.writeMarks(ctx, t.l.conn, marks, nil); err != nil {
		t.l.end(ctx, false)
		t.undoDDLs()
		return err
	}
	var explain func(error) error
	if t.deferredFK {
		explain = func(err error) error { return explainForeignKey(ctx, t.l.conn, err) }
	}
	if err := t.l.endExplained(ctx, true, explain); err != nil {
		t.undoDDLs()
		return fmt.Errorf("apply: commit: %w", t.s.d.classify(err))
	}
	t.s.committed(marks, t.conflicts)
	return nil
}

func (t *sqliteTx) Rollback() error {
	if t.done {
		return nil
	}
	t.done = true
	t.giveScratch()
	err := t.l.end(context.Background(), false)
	t.undoDDLs()
	return err
}
