package sqliteddl

import (
	"fmt"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/mysqltok"
)

// SQLite refuses ALTER TABLE … DROP COLUMN of a column an index holds. MySQL
// drops the column from each index that holds it, and drops an index whose
// only column it was; a unique index stays unique on its other columns. The
// caller, which reads the catalog, does the same before the drop: it drops
// each index holding the column, and creates again, under its name, each
// that keeps other columns (IndexWithoutColumn).

// IndexWithoutColumn rewrites the SQL of an index as sqlite_master holds it
// (CREATE [UNIQUE] INDEX name ON table (parts) [WHERE …]) without the key
// parts of column, the rest kept as it is: has reports whether the index
// holds the column, and left how many key parts remain (none: the index
// goes with the column). An expression among the key parts, or a WHERE
// clause, that reads the column fails with apply.ErrUnsupportedDDL: MySQL
// has neither in a redo log's DDL, and what it would do there is not ours
// to guess.
func IndexWithoutColumn(sql, column string) (out string, has bool, left int, err error) {
	all, err := mysqltok.TokenizeANSI(sql)
	if err != nil {
		return "", false, 0, fmt.Errorf("index SQL %q: %v", sql, err)
	}
	open := -1
	on := false
	for i, t := range all {
		if t.Word() == "ON" {
			on = true
		}
		if on && t.Is('(') {
			open = i
			break
		}
	}
	end := -1
	if open >= 0 {
		end = mysqltok.Closing(all, open)
	}
	if end < 0 || !mysqltok.Words(mysqltok.Solid(all), "CREATE") {
		return "", false, 0, fmt.Errorf("index SQL %q: not CREATE INDEX name ON table (…)", sql)
	}
	reads := func(toks []mysqltok.Token) bool {
		for _, t := range toks {
			if t.IsName() && foldEqual(t.Name(), column) {
				return true
			}
		}
		return false
	}
	if reads(all[end+1:]) {
		return "", false, 0, fmt.Errorf("%w: index SQL %q: its WHERE clause reads column %q", apply.ErrUnsupportedDDL, sql, column)
	}
	var kept []string
	for _, part := range mysqltok.SplitTop(all[open+1 : end]) {
		solid := mysqltok.Solid(part)
		name, ok := indexPartColumn(solid)
		switch {
		case ok && foldEqual(name, column):
			has = true
			continue
		case !ok && reads(solid):
			return "", false, 0, fmt.Errorf("%w: index SQL %q: key part %q reads column %q", apply.ErrUnsupportedDDL, sql, mysqltok.Join(part), column)
		}
		kept = append(kept, mysqltok.Join(part))
	}
	if !has {
		return sql, false, len(kept), nil
	}
	return mysqltok.Join(all[:open+1]) + strings.Join(kept, ", ") + mysqltok.Join(all[end:]), true, len(kept), nil
}

// indexPartColumn returns the column of a key part of a SQLite index,
// "name [COLLATE c] [ASC|DESC]"; ok is false for an expression.
func indexPartColumn(toks []mysqltok.Token) (name string, ok bool) {
	if len(toks) == 0 || !toks[0].IsName() {
		return "", false
	}
	rest := toks[1:]
	if len(rest) >= 2 && rest[0].Word() == "COLLATE" && rest[1].IsName() {
		rest = rest[2:]
	}
	if len(rest) == 1 && (rest[0].Word() == "ASC" || rest[0].Word() == "DESC") {
		rest = rest[1:]
	}
	return toks[0].Name(), len(rest) == 0
}

// foldEqual compares names as SQLite does: ASCII letters case-insensitively.
func foldEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if x >= 'A' && x <= 'Z' {
			x += 'a' - 'A'
		}
		if y >= 'A' && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
