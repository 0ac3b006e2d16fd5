package cli

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/workload"
)

// comparison is the result of checking a downstream database against the
// model of the upstream.
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

// dialect is the kind of downstream compareDB reads.
type dialect int

const (
	sqliteDB dialect = iota
	mysqlDB
)

// compareSQLite compares the SQLite file at path with the model.
func compareSQLite(ctx context.Context, path string, want *workload.Model) (*comparison, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return compareDB(ctx, db, sqliteDB, want)
}

// compareDB reads every table of the downstream (of the model's schema on
// MySQL; all but the apply progress table on SQLite) and compares tables,
// columns and rows with the model. It reads the database directly, not
// through the applier, so a bug in the applier cannot hide itself.
func compareDB(ctx context.Context, db *sql.DB, d dialect, want *workload.Model) (*comparison, error) {
	var (
		q    string
		args []any
	)
	if d == sqliteDB {
		q = `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`
	} else {
		q, args = `SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name`, []any{want.Schema}
	}
	got, err := queryStrings(ctx, db, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list the downstream tables: %w", err)
	}
	got = slices.DeleteFunc(got, func(n string) bool { return n == apply.DefaultProgressTable })
	c := &comparison{}
	for _, n := range got {
		if want.Tables[n] == nil {
			c.diff("table %s exists downstream but not upstream", n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want.Tables)) {
		if !slices.Contains(got, n) {
			c.diff("table %s is missing downstream", n)
			continue
		}
		c.Tables++
		if err := compareTable(ctx, db, d, want.Schema, want.Tables[n], c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func compareTable(ctx context.Context, db *sql.DB, d dialect, schema string, t *workload.Table, c *comparison) error {
	var (
		cols []string
		err  error
		from string
	)
	if d == sqliteDB {
		cols, err = queryStrings(ctx, db, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, t.Name)
		from = `"` + t.Name + `"`
	} else {
		cols, err = queryStrings(ctx, db, `SELECT column_name FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position`, schema, t.Name)
		from = "`" + schema + "`.`" + t.Name + "`"
	}
	if err != nil {
		return fmt.Errorf("read the columns of %s: %w", t.Name, err)
	}
	var wantCols []string
	for _, col := range t.Columns {
		wantCols = append(wantCols, col.Name)
	}
	if !slices.Equal(cols, wantCols) {
		c.diff("table %s has columns %v downstream, %v upstream", t.Name, cols, wantCols)
		return nil
	}
	rows, err := db.QueryContext(ctx, "SELECT * FROM "+from+" ORDER BY id")
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
		id, ok := asInt(vals[0])
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
			isInt := t.Columns[i].Type == codec.TypeLonglong || t.Columns[i].Type == codec.TypeLong
			if g, w := dbText(v, d, isInt), modelText(want[i]); g != w {
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

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case []byte: // MySQL's text protocol
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// dbText and modelText render a value the same way from both sides: the
// workload only has integers, text and NULL. SQLite returns typed values, so
// its comparison also checks the type; MySQL's text protocol returns every
// value as bytes, so there the column's type (isInt) says how to read them.
func dbText(v any, d dialect, isInt bool) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		return strconv.Quote(x)
	case []byte:
		if d == mysqlDB && isInt {
			return string(x)
		}
		return strconv.Quote(string(x))
	}
	return fmt.Sprintf("%T(%v)", v, v)
}

func modelText(v codec.Value) string {
	switch v.Kind() {
	case codec.KindNull:
		return "NULL"
	case codec.KindInt:
		return strconv.FormatInt(v.Int(), 10)
	case codec.KindString:
		return strconv.Quote(v.Text())
	}
	return v.String()
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
