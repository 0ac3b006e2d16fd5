package difffuzz

import (
	"fmt"
	"slices"
	"strings"

	"github.com/redokit/redokit/codec"
)

// Column is a column of a model table.
type Column struct {
	Name     string
	T        *colType
	Nullable bool
	Bin      bool // a character column declared COLLATE utf8mb4_bin
}

// Index is an index of a model table; the primary key is the one named
// PRIMARY.
type Index struct {
	Name   string
	Cols   []string
	Unique bool
}

func (x *Index) primary() bool { return x.Name == "PRIMARY" }

// Table is a model table: its definition as MySQL holds it, and its rows
// (values in the order of Cols; a table without a key may hold identical
// rows).
type Table struct {
	Name string
	ID   int64 // its physical ID, new on CREATE and TRUNCATE
	Cols []*Column
	Idx  []*Index
	Rows [][]codec.Value
	// Tree marks a self-referencing table: id (its key) and parent (an id
	// of the table, or NULL), declared with a foreign key.
	Tree bool
	// Ref names the tree a child table's pid references (an id of it, or
	// NULL), declared with a foreign key; "" for other tables.
	Ref string
}

// fixed reports whether column name of t is one of a foreign key's (a
// tree's id or parent, a child's pid), which no DDL alters.
func (t *Table) fixed(name string) bool {
	return t.Tree && (name == "id" || name == "parent") || t.Ref != "" && name == "pid"
}

// fkCol reports whether column name of t references another row.
func (t *Table) fkCol(name string) bool {
	return t.Tree && name == "parent" || t.Ref != "" && name == "pid"
}

func (t *Table) col(name string) int {
	return slices.IndexFunc(t.Cols, func(c *Column) bool { return c.Name == name })
}

// key is the index a sink finds a row by: the primary key, else the first
// unique index of NOT NULL columns (the handle key TiCDC flags); nil when
// the table has none.
func (t *Table) key() *Index {
	for _, x := range t.Idx {
		if x.primary() {
			return x
		}
	}
	for _, x := range t.Idx {
		if x.Unique && !slices.ContainsFunc(x.Cols, func(n string) bool { return t.Cols[t.col(n)].Nullable }) {
			return x
		}
	}
	return nil
}

func (t *Table) inIndex(name string) (any, multi bool) {
	for _, x := range t.Idx {
		if slices.Contains(x.Cols, name) {
			any = true
			if len(x.Cols) > 1 {
				multi = true
			}
		}
	}
	return
}

// image is row as a log carries it, flagged by the table's current
// definition.
func (t *Table) image(row []codec.Value) []codec.Column {
	key := t.key()
	out := make([]codec.Column, len(t.Cols))
	for i, c := range t.Cols {
		f := c.T.flags
		if c.Nullable {
			f |= codec.FlagNullable
		}
		for _, x := range t.Idx {
			if !slices.Contains(x.Cols, c.Name) {
				continue
			}
			switch {
			case x.primary():
				f |= codec.FlagPrimaryKey
			case x.Unique:
				f |= codec.FlagUniqueKey
			default:
				f |= codec.FlagMultipleKey
			}
		}
		if key != nil && slices.Contains(key.Cols, c.Name) {
			f |= codec.FlagHandleKey
		}
		col := codec.Column{Name: c.Name, Type: c.T.typ, Flags: f, Value: row[i]}
		switch {
		case c.T.text:
			col.Charset = "utf8mb4"
			col.Collation = "utf8mb4_general_ci"
			if c.Bin {
				col.Collation = "utf8mb4_bin"
			}
		case c.T.flags.Has(codec.FlagBinary):
			col.Charset, col.Collation = "binary", "binary"
		}
		out[i] = col
	}
	return out
}

// tuple is the values of row in x's columns as one comparable string, and
// false when one is NULL (a unique index holds any number of those).
func (t *Table) tuple(x *Index, row []codec.Value) (string, bool) {
	var b strings.Builder
	for _, n := range x.Cols {
		c := t.Cols[t.col(n)]
		v := row[t.col(n)]
		if v.IsNull() {
			return "", false
		}
		switch {
		case c.T.text && v.Kind() == codec.KindString:
			// PAD SPACE (utf8mb4_bin and utf8mb4_general_ci both):
			// trailing spaces do not count; utf8mb4_general_ci: the
			// generator's key values differ at most in the case of
			// ASCII letters.
			k := strings.TrimRight(v.Text(), " ")
			if !c.Bin {
				k = strings.ToLower(k)
			}
			b.WriteString(k)
		default:
			b.WriteString(v.String())
		}
		b.WriteByte(0)
	}
	return b.String(), true
}

// legal reports whether rows satisfy every unique index of t.
func (t *Table) legal(rows [][]codec.Value) bool {
	for _, x := range t.Idx {
		if !x.Unique {
			continue
		}
		seen := map[string]bool{}
		for _, r := range rows {
			k, ok := t.tuple(x, r)
			if !ok {
				if x.primary() {
					return false
				}
				continue
			}
			if seen[k] {
				return false
			}
			seen[k] = true
		}
	}
	return true
}

// colDef is a column's definition in a MySQL DDL.
func (c *Column) colDef() string {
	s := "`" + c.Name + "` " + c.T.sql
	if c.Bin {
		s += " COLLATE utf8mb4_bin"
	}
	if c.Nullable {
		if c.T == tTS {
			s += " NULL DEFAULT NULL"
		} else {
			s += " NULL"
		}
	} else {
		s += " NOT NULL"
	}
	return s
}

func (x *Index) def() string {
	cols := "`" + strings.Join(x.Cols, "`, `") + "`"
	switch {
	case x.primary():
		return "PRIMARY KEY (" + cols + ")"
	case x.Unique:
		return "UNIQUE KEY `" + x.Name + "` (" + cols + ")"
	}
	return "KEY `" + x.Name + "` (" + cols + ")"
}

// createSQL is t's CREATE TABLE.
func (t *Table) createSQL() string {
	var parts []string
	for _, c := range t.Cols {
		parts = append(parts, c.colDef())
	}
	for _, x := range t.Idx {
		parts = append(parts, x.def())
	}
	if t.Tree {
		parts = append(parts, "CONSTRAINT `fk"+fmt.Sprint(t.ID)+"` FOREIGN KEY (`parent`) REFERENCES `"+t.Name+"` (`id`)")
	}
	if t.Ref != "" {
		parts = append(parts, "CONSTRAINT `fk"+fmt.Sprint(t.ID)+"` FOREIGN KEY (`pid`) REFERENCES `"+t.Ref+"` (`id`)")
	}
	return fmt.Sprintf("CREATE TABLE `%s` (%s) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4", t.Name, strings.Join(parts, ", "))
}
