package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// sqliteSink is the downstream: a SQLite database written through the
// apply package's SQL sink, the way a CDC sink in safe mode writes MySQL: an
// insert or update replaces the whole row, a delete deletes by key, and a DDL
// whose effect is already there (a column already added) counts as applied.
// So replaying events the database already holds (after a failover) changes
// nothing.
//
// The gate hands it batches in commit-ts order; it writes each run of rows
// between two DDLs in one transaction, a table's rows in their order. It
// records no apply progress (marks): that bookkeeping assumes one stream in
// commit-ts order, and a span that fails over to a gate catches up behind
// the other spans' events.
type sqliteSink struct {
	s *apply.SQLSink
}

func openSink(ctx context.Context, path string, tables []*table) (*sqliteSink, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s, err := apply.Open(ctx, "sqlite://"+abs, nil)
	if err != nil {
		return nil, err
	}
	// The upstream's tables as they were when the log starts.
	for _, t := range tables {
		if _, err := s.DB().ExecContext(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (id INTEGER PRIMARY KEY, v TEXT)", t.name)); err != nil {
			s.Close()
			return nil, err
		}
	}
	return &sqliteSink{s: s}, nil
}

func (s *sqliteSink) Close() error { return s.s.Close() }

// Apply writes one batch from a gate.
func (s *sqliteSink) Apply(ctx context.Context, evs []codec.Event) error {
	var order []apply.Table
	rows := map[apply.Table][]*codec.RowChange{}
	flush := func() error {
		if len(order) == 0 {
			return nil
		}
		tx, err := s.s.Begin(ctx)
		if err != nil {
			return err
		}
		for _, t := range order {
			if err := tx.ApplyRows(ctx, t, rows[t]); err != nil {
				tx.Rollback()
				return err
			}
		}
		order = order[:0]
		clear(rows)
		return tx.Commit(ctx, nil)
	}
	for i := range evs {
		ev := &evs[i]
		if ev.IsDDL() {
			if err := flush(); err != nil {
				return err
			}
			if err := s.s.ApplyDDL(ctx, &ev.DDL, apply.DDLMark{}); err != nil {
				return err
			}
			continue
		}
		t := apply.TableOf(ev.Row.Table)
		if _, ok := rows[t]; !ok {
			order = append(order, t)
		}
		rows[t] = append(rows[t], &ev.Row)
	}
	return flush()
}

func sqlValue(v codec.Value) any {
	switch v.Kind() {
	case codec.KindNull:
		return nil
	case codec.KindInt:
		return v.Int()
	default:
		return v.Text()
	}
}

// compare checks that the database holds exactly the upstream's final state.
func (s *sqliteSink) compare(ctx context.Context, tables []*table) (rows int, err error) {
	for _, t := range tables {
		cols := append([]string{"id", "v"}, t.columns...)
		q := fmt.Sprintf("SELECT %s FROM %s ORDER BY id", strings.Join(cols, ", "), t.name)
		res, err := s.s.DB().QueryContext(ctx, q)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", t.name, err)
		}
		got := map[int64][]any{}
		for res.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := res.Scan(ptrs...); err != nil {
				res.Close()
				return rows, err
			}
			got[vals[0].(int64)] = vals
		}
		res.Close()
		if err := res.Err(); err != nil {
			return rows, err
		}
		rows += len(got)
		for _, id := range slices.Sorted(maps.Keys(t.rows)) {
			want := t.rows[id]
			g, ok := got[id]
			if !ok {
				return rows, fmt.Errorf("%s: row %d is missing downstream", t.name, id)
			}
			for i, c := range want {
				if w := sqlValue(c.val); fmt.Sprint(g[i]) != fmt.Sprint(w) {
					return rows, fmt.Errorf("%s: row %d column %s is %v downstream, %v upstream", t.name, id, c.name, g[i], w)
				}
			}
			delete(got, id)
		}
		for id := range got {
			return rows, fmt.Errorf("%s: row %d is downstream but not upstream", t.name, id)
		}
	}
	return rows, nil
}
