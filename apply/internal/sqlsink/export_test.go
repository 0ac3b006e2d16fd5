package sqlsink

import (
	"context"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// NaiveApply is the baseline the benchmark compares apply.Run with: one statement
// per row change, each in its own autocommit transaction, one connection, no
// batching, no progress table — the simplest correct replay. It shares the
// SQL sink's statements (as one-row statements) and DDL handling.
func NaiveApply(ctx context.Context, s *SQLSink, events []*codec.Event) (rows int, err error) {
	one := &SQLSink{db: s.db, d: s.d, o: s.o, progress: s.progress, name: s.name}
	one.o.MaxStatementRows = 1
	tx := &sqlTx{s: one, ex: s.db}
	for _, ev := range events {
		if ev.IsDDL() {
			if err := s.ApplyDDL(ctx, &ev.DDL, apply.DDLMark{CommitTs: ev.DDL.CommitTs, Count: 1}); err != nil {
				return rows, err
			}
			continue
		}
		if err := tx.ApplyRows(ctx, apply.TableOf(ev.Row.Table), []*codec.RowChange{&ev.Row}); err != nil {
			return rows, err
		}
		rows++
	}
	return rows, nil
}

// Table is the downstream name of t in d.
func (d Dialect) Table(t apply.Table) string { return string(d.table(nil, t)) }
