package main

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/internal/gen"
)

// comparison is the result of checking a downstream SQLite database against
// the model of the upstream.
type comparison struct {
	Tables      int      `json:"tables"`
	Rows        int      `json:"rows"`
	Differences int      `json:"differences"`
	Examples    []string `json:"examples,omitempty"` // the first few differences
}

func (c *comparison) diff(format string, args ...any) {
	c.Differences++
	if len(c.Examples) < 10 {
		c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
	}
}

// compareSQLite reads every table of the SQLite file at path (except the
// apply progress table) and compares tables, columns and rows with the
// model. It reads the file directly, not through the applier, so a bug in
// the applier cannot hide itself.
func compareSQLite(ctx context.Context, path string, want *gen.Model) (*comparison, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", path, err)
	}
	var got []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		if n != apply.DefaultProgressTable {
			got = append(got, n)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	c := &comparison{}
	wantNames := slices.Sorted(maps.Keys(want.Tables))
	for _, n := range got {
		if want.Tables[n] == nil {
			c.diff("table %s exists downstream but not upstream", n)
		}
	}
	for _, n := range wantNames {
		if !slices.Contains(got, n) {
			c.diff("table %s is missing downstream", n)
			continue
		}
		c.Tables++
		if err := compareTable(ctx, db, want.Tables[n], c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func compareTable(ctx context.Context, db *sql.DB, t *gen.Table, c *comparison) error {
	cols, err := tableColumns(ctx, db, t.Name)
	if err != nil {
		return err
	}
	var wantCols []string
	for _, col := range t.Columns {
		wantCols = append(wantCols, col.Name)
	}
	if !slices.Equal(cols, wantCols) {
		c.diff("table %s has columns %v downstream, %v upstream", t.Name, cols, wantCols)
		return nil
	}
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT * FROM "%s" ORDER BY "id"`, t.Name))
	if err != nil {
		return fmt.Errorf("read table %s: %w", t.Name, err)
	}
	defer rows.Close()
	seen := map[int64]bool{}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		id, ok := vals[0].(int64)
		if !ok {
			c.diff("table %s: a row's id is %T %v, not an integer", t.Name, vals[0], vals[0])
			continue
		}
		seen[id] = true
		want, ok := t.Rows[id]
		if !ok {
			c.diff("table %s: row id=%d exists downstream but not upstream", t.Name, id)
			continue
		}
		c.Rows++
		for i, v := range vals {
			if g, w := sqlText(v), modelText(want[i]); g != w {
				c.diff("table %s row id=%d column %s: downstream %s, upstream %s", t.Name, id, cols[i], clip(g), clip(w))
			}
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(t.Rows)) {
		if !seen[id] {
			c.diff("table %s: row id=%d is missing downstream", t.Name, id)
		}
	}
	return nil
}

func tableColumns(ctx context.Context, db *sql.DB, table string) ([]string, error) {
	rows, err := db.QueryContext(ctx, fmt.Sprintf(`SELECT name FROM pragma_table_info('%s') ORDER BY cid`, strings.ReplaceAll(table, "'", "''")))
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// sqlText and modelText render a value the same way from both sides: the
// workload only has integers, text and NULL.
func sqlText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return fmt.Sprintf("int(%d)", x)
	case string:
		return fmt.Sprintf("text(%q)", x)
	case []byte:
		return fmt.Sprintf("text(%q)", x)
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

func modelText(v codec.Value) string {
	switch v.Kind() {
	case codec.KindNull:
		return "NULL"
	case codec.KindInt:
		return fmt.Sprintf("int(%d)", v.Int())
	case codec.KindString:
		return fmt.Sprintf("text(%q)", v.Text())
	}
	return v.String()
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
