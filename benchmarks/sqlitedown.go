package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "modernc.org/sqlite"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/bench"
)

// sqliteDown is the toy pipeline's downstream: one SQLite table per span,
// each batch of events upserted in one transaction. It knows the generator's
// columns (id, acct, status, created, note).
type sqliteDown struct {
	db    *sql.DB
	stmts map[string]string
}

func openSQLiteDown(path string, tables int) (*sqliteDown, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	d := &sqliteDown{db: db, stmts: map[string]string{}}
	for s := range tables {
		t := bench.Table(s)
		if _, err := db.Exec(fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id INTEGER PRIMARY KEY, acct INTEGER, status INTEGER, created TEXT, note TEXT, ts INTEGER)", t.Name)); err != nil {
			db.Close()
			return nil, err
		}
		d.stmts[t.Name] = fmt.Sprintf("INSERT OR REPLACE INTO %s (id, acct, status, created, note, ts) VALUES (?, ?, ?, ?, ?, ?)", t.Name)
	}
	return d, nil
}

// apply upserts the row events of evs in one transaction (DDLs are skipped:
// the toy downstream's schema is fixed).
func (d *sqliteDown) apply(ctx context.Context, evs []codec.Event) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	prepared := map[string]*sql.Stmt{}
	defer func() {
		for _, st := range prepared {
			st.Close()
		}
	}()
	for i := range evs {
		ev := &evs[i]
		if ev.Kind != codec.RowEvent {
			continue
		}
		name := ev.Row.Table.Name
		st := prepared[name]
		if st == nil {
			q, ok := d.stmts[name]
			if !ok {
				tx.Rollback()
				return fmt.Errorf("no downstream table for %s", name)
			}
			if st, err = tx.PrepareContext(ctx, q); err != nil {
				tx.Rollback()
				return err
			}
			prepared[name] = st
		}
		c := ev.Row.Columns
		if _, err := st.ExecContext(ctx, c[0].Value.Int(), int64(c[1].Value.Uint()), c[2].Value.Int(),
			c[3].Value.DateTime().String(), c[4].Value.Text(), int64(ev.Row.CommitTs-bench.TsBase)); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (d *sqliteDown) close() error { return d.db.Close() }
