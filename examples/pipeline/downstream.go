package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/redokit/redokit/apply/sqlite"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/sinkgate"
)

// sqliteSink is the downstream: a SQLite database written through the
// apply/sqlite sink, the way a CDC sink in safe mode writes MySQL: an insert
// or update replaces the whole row, a delete deletes by key, and a DDL whose
// effect is already there (a column already added) counts as applied.
// sinkgate.ApplyTo replays each batch a gate releases with apply.Run, which
// records each table's progress in the same transactions as its rows: a
// batch that comes again (after a failure, or a failover that replays a
// table from the log's checkpoint) skips what its tables already hold.
type sqliteSink struct {
	sinkgate.Downstream
	s *sqlite.Sink
}

func openSink(ctx context.Context, path string, tables []*table) (*sqliteSink, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	s, err := sqlite.Open(ctx, "sqlite://"+abs, nil)
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
	return &sqliteSink{Downstream: sinkgate.ApplyTo(s, nil), s: s}, nil
}

func (s *sqliteSink) Close() error { return s.s.Close() }

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
