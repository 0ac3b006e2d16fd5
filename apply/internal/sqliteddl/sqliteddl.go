package sqliteddl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/mysqltok"
	"github.com/redokit/redokit/codec"
)

// This file turns a MySQL DDL into what SQLite can run. It is a token-level
// rewrite, not a parser: it knows the few statement forms a redo log's DDLs
// take (apply/sqlite's package doc lists them) and fails with
// apply.ErrUnsupportedDDL on the forms SQLite has no equivalent for, rather
// than guess.

// unqualify drops "schema." before names, for the schemas of the DDL: SQLite
// has one namespace per file.
func unqualify(toks []mysqltok.Token, schemas map[string]bool) []mysqltok.Token {
	out := toks[:0:0]
	for i := 0; i < len(toks); i++ {
		if toks[i].IsName() && schemas[toks[i].Name()] && i+2 < len(toks) && toks[i+1].Is('.') && toks[i+2].IsName() &&
			(i == 0 || !toks[i-1].Is('.')) {
			i++ // skip the schema and the dot
			continue
		}
		out = append(out, toks[i])
	}
	return out
}

// IndexName is the SQLite name of a MySQL index: index names are per table
// in MySQL and per database in SQLite, so they are prefixed with the table:
// index i of table t is "t.i".
func IndexName(table, index string) string { return table + "." + index }

func sqliteIndexName(table, index string) string { return quote(IndexName(table, index)) }

// Quote quotes an identifier for SQLite.
func Quote(name string) string { return quote(name) }

// Op is what a statement of a rewrite does to the tables and indexes, where
// its caller must know: SQLite has no ALTER INDEX, so the caller renames a
// table's indexes with the table, and checks an index exists before it
// drops it.
type Op uint8

// Ops.
const (
	OpOther       Op = iota
	OpCreateTable    // creates Table
	OpDropTable      // drops Table (or a view)
	OpRenameTable    // renames Table to To; its indexes keep their names
	OpCreateIndex    // creates index Index (its SQLite name) on Table
	OpDropIndex      // drops index Index (its SQLite name) of Table
	OpRenameIndex    // renames index Index of Table to To (SQLite names); no SQL: the caller's
	OpDropColumn     // drops column Column of Table; the caller first drops (and makes again without it) the indexes holding it
)

// Stmt is one SQLite statement of a rewritten DDL.
type Stmt struct {
	SQL   string
	Op    Op
	Table string // the table it acts on, unquoted
	To    string // OpRenameTable, OpRenameIndex: the new name
	Index string // OpCreateIndex, OpDropIndex, OpRenameIndex: the index's SQLite name, unquoted
	// Column (OpDropColumn) is the column dropped, unquoted.
	Column string
	// Auto (OpCreateIndex) is the first column of an index that had no
	// name in the DDL: MySQL names it so, or adds _2, _3, … when the table
	// has an index of that name already, which the caller knows.
	Auto string
}

func other(sql string) Stmt { return Stmt{SQL: sql} }

// Rewrite rewrites a MySQL DDL into the SQLite statements that do the same,
// or fails with apply.ErrUnsupportedDDL. No statements means nothing to do.
func Rewrite(ddl *codec.DDL) ([]Stmt, error) {
	all, err := mysqltok.Tokenize(ddl.Query)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", apply.ErrUnsupportedDDL, err)
	}
	schemas := map[string]bool{}
	if ddl.Table.Schema != "" {
		schemas[ddl.Table.Schema] = true
	}
	for _, t := range ddl.Tables {
		if t.Schema != "" {
			schemas[t.Schema] = true
		}
	}
	toks := unqualify(mysqltok.Solid(all), schemas)
	unsupported := func(why string) ([]Stmt, error) {
		return nil, fmt.Errorf("%w: %s", apply.ErrUnsupportedDDL, why)
	}
	switch {
	case len(toks) == 0:
		return nil, nil
	case mysqltok.Words(toks, "CREATE", "DATABASE"), mysqltok.Words(toks, "CREATE", "SCHEMA"):
		return nil, nil // schemas are ignored: every table is in the one file
	case mysqltok.Words(toks, "DROP", "DATABASE"), mysqltok.Words(toks, "DROP", "SCHEMA"):
		return unsupported("SQLite keeps no schemas, so it cannot drop one")
	case mysqltok.Words(toks, "TRUNCATE"):
		rest := toks[1:]
		if mysqltok.Words(rest, "TABLE") {
			rest = rest[1:]
		}
		if len(rest) != 1 || !rest[0].IsName() {
			return unsupported("TRUNCATE of anything but one table")
		}
		return []Stmt{other("DELETE FROM " + quote(rest[0].Name()))}, nil
	case mysqltok.Words(toks, "RENAME", "TABLE"):
		var out []Stmt
		for _, pair := range mysqltok.SplitTop(toks[2:]) {
			if len(pair) != 3 || !pair[0].IsName() || pair[1].Word() != "TO" || !pair[2].IsName() {
				return unsupported("RENAME TABLE form")
			}
			out = append(out, renameTable(pair[0].Name(), pair[2].Name()))
		}
		return out, nil
	case mysqltok.Words(toks, "DROP", "TABLE"), mysqltok.Words(toks, "DROP", "VIEW"):
		// SQLite drops one table per statement.
		rest, ifExists := toks[2:], ""
		if mysqltok.Words(rest, "IF", "EXISTS") {
			rest, ifExists = rest[2:], "IF EXISTS "
		}
		for len(rest) > 0 && (rest[len(rest)-1].Word() == "CASCADE" || rest[len(rest)-1].Word() == "RESTRICT") {
			rest = rest[:len(rest)-1]
		}
		var out []Stmt
		for _, t := range mysqltok.SplitTop(rest) {
			if len(t) != 1 || !t[0].IsName() {
				return unsupported("DROP form")
			}
			out = append(out, Stmt{SQL: "DROP " + toks[1].Word() + " " + ifExists + quote(t[0].Name()), Op: OpDropTable, Table: t[0].Name()})
		}
		return out, nil
	case mysqltok.Words(toks, "DROP", "INDEX"):
		// DROP INDEX i ON t
		if len(toks) < 5 || !toks[2].IsName() || toks[3].Word() != "ON" || !toks[4].IsName() {
			return unsupported("DROP INDEX form")
		}
		s, err := dropIndex(toks[4].Name(), toks[2].Name())
		if err != nil {
			return nil, err
		}
		return []Stmt{s}, nil
	case mysqltok.Words(toks, "CREATE", "INDEX"), mysqltok.Words(toks, "CREATE", "UNIQUE", "INDEX"),
		mysqltok.Words(toks, "CREATE", "FULLTEXT", "INDEX"), mysqltok.Words(toks, "CREATE", "SPATIAL", "INDEX"):
		return sqliteCreateIndex(toks)
	case mysqltok.Words(toks, "CREATE", "TABLE"):
		return sqliteCreateTable(toks)
	case mysqltok.Words(toks, "ALTER", "TABLE"):
		return sqliteAlterTable(toks)
	}
	// Anything else (CREATE VIEW, …) runs as logged; SQLite's error, if
	// any, names the problem.
	return []Stmt{other(mysqltok.Join(all))}, nil
}

// renameTable renames a table; the caller renames its indexes.
func renameTable(from, to string) Stmt {
	return Stmt{SQL: "ALTER TABLE " + quote(from) + " RENAME TO " + quote(to), Op: OpRenameTable, Table: from, To: to}
}

// dropIndex drops index of table. MySQL's PRIMARY is the primary key, which
// SQLite cannot drop.
func dropIndex(table, index string) (Stmt, error) {
	if strings.EqualFold(index, "PRIMARY") {
		return Stmt{}, fmt.Errorf("%w: dropping a primary key (SQLite cannot)", apply.ErrUnsupportedDDL)
	}
	return Stmt{SQL: "DROP INDEX " + sqliteIndexName(table, index), Op: OpDropIndex, Table: table, Index: IndexName(table, index)}, nil
}

// createIndex is the statement creating index name on table.
func createIndex(unique, ifNot, table, name, cols string) Stmt {
	return Stmt{SQL: "CREATE " + unique + "INDEX " + ifNot + sqliteIndexName(table, name) + " ON " + quote(table) + " (" + cols + ")",
		Op: OpCreateIndex, Table: table, Index: IndexName(table, name)}
}

// sqliteCreateIndex: CREATE [UNIQUE] INDEX i ON t (cols) [USING …] [options].
func sqliteCreateIndex(toks []mysqltok.Token) ([]Stmt, error) {
	i := 1
	unique := ""
	switch toks[i].Word() {
	case "UNIQUE":
		unique = "UNIQUE "
		i++
	case "FULLTEXT", "SPATIAL":
		// A plain index: it changes no result, and a later DROP INDEX
		// finds it.
		i++
	}
	i++ // INDEX
	ifNot := ""
	if mysqltok.Words(toks[i:], "IF", "NOT", "EXISTS") {
		ifNot = "IF NOT EXISTS "
		i += 3
	}
	if i+3 >= len(toks) || !toks[i].IsName() || toks[i+1].Word() != "ON" || !toks[i+2].IsName() || !toks[i+3].Is('(') {
		return nil, fmt.Errorf("%w: CREATE INDEX form", apply.ErrUnsupportedDDL)
	}
	idx, table := toks[i].Name(), toks[i+2].Name()
	end := mysqltok.Closing(toks, i+3)
	if end < 0 {
		return nil, fmt.Errorf("%w: unbalanced parentheses", apply.ErrUnsupportedDDL)
	}
	cols, err := indexColumns(toks[i+4 : end])
	if err != nil {
		return nil, err
	}
	return []Stmt{createIndex(unique, ifNot, table, idx, cols)}, nil
}

// indexColumns renders an index's column list, dropping MySQL prefix lengths
// (`c`(10)), which SQLite does not have.
func indexColumns(toks []mysqltok.Token) (string, error) {
	var parts []string
	for _, col := range mysqltok.SplitTop(toks) {
		name, order, ok := mysqltok.KeyPart(col)
		if !ok {
			return "", fmt.Errorf("%w: index part %q", apply.ErrUnsupportedDDL, mysqltok.Spaced(col))
		}
		parts = append(parts, strings.TrimSpace(quote(name)+" "+order))
	}
	return strings.Join(parts, ", "), nil
}

// sqliteCreateTable: CREATE TABLE [IF NOT EXISTS] t (elements) [options]. The
// table options are dropped, column definitions lose MySQL-only attributes,
// and inline KEY/INDEX elements become CREATE INDEX statements.
func sqliteCreateTable(toks []mysqltok.Token) ([]Stmt, error) {
	i := 2
	ifNot := ""
	if mysqltok.Words(toks[i:], "IF", "NOT", "EXISTS") {
		ifNot = "IF NOT EXISTS "
		i += 3
	}
	if i+1 >= len(toks) || !toks[i].IsName() {
		return nil, fmt.Errorf("%w: CREATE TABLE form", apply.ErrUnsupportedDDL)
	}
	table := toks[i].Name()
	if !toks[i+1].Is('(') {
		return nil, fmt.Errorf("%w: CREATE TABLE without a column list (LIKE, AS SELECT)", apply.ErrUnsupportedDDL)
	}
	end := mysqltok.Closing(toks, i+1)
	if end < 0 {
		return nil, fmt.Errorf("%w: unbalanced parentheses", apply.ErrUnsupportedDDL)
	}
	var elems []string
	var after []Stmt
	names := map[string]bool{}
	parts := mysqltok.SplitTop(toks[i+2 : end])
	rowid := rowidColumn(parts)
	index := func(unique string, el []mysqltok.Token) error {
		s, err := inlineIndex(table, unique, "IF NOT EXISTS ", el, names)
		after = append(after, s)
		return err
	}
	for _, el := range parts {
		if len(el) == 0 {
			continue
		}
		switch {
		case el[0].Word() == "KEY" || el[0].Word() == "INDEX":
			if err := index("", el[1:]); err != nil {
				return nil, err
			}
		case el[0].Word() == "UNIQUE":
			rest := el[1:]
			if len(rest) > 0 && (rest[0].Word() == "KEY" || rest[0].Word() == "INDEX") {
				rest = rest[1:]
			}
			if err := index("UNIQUE ", rest); err != nil {
				return nil, err
			}
		case el[0].Word() == "FULLTEXT" || el[0].Word() == "SPATIAL":
			// A plain index: it changes no result, and a later DROP INDEX
			// finds it.
			rest := el[1:]
			if len(rest) > 0 && (rest[0].Word() == "KEY" || rest[0].Word() == "INDEX") {
				rest = rest[1:]
			}
			if err := index("", rest); err != nil {
				return nil, err
			}
		case el[0].Word() == "CONSTRAINT" && constraintUnique(el) != nil:
			if err := index("UNIQUE ", constraintUnique(el)); err != nil {
				return nil, err
			}
		case el[0].Word() == "PRIMARY" || el[0].Word() == "CONSTRAINT" || el[0].Word() == "CHECK" || el[0].Word() == "FOREIGN":
			elems = append(elems, mysqltok.Spaced(cleanConstraint(el)))
		default:
			if el[0].IsName() && el[0].Name() == rowid {
				el = asInteger(el)
			}
			s, unique, err := columnDef(el)
			if err != nil {
				return nil, err
			}
			elems = append(elems, s)
			if unique {
				// MySQL names the index of a UNIQUE (or SERIAL) column
				// after it, taking the name in the order of the text.
				c := el[0].Name()
				names[strings.ToLower(c)] = true
				after = append(after, createIndex("UNIQUE ", "IF NOT EXISTS ", table, c, quote(c)))
			}
		}
	}
	out := []Stmt{{SQL: "CREATE TABLE " + ifNot + quote(table) + " (" + strings.Join(elems, ", ") + ")", Op: OpCreateTable, Table: table}}
	return append(out, after...), nil
}

// rowidColumn returns the column that is the whole primary key, when it is
// a signed integer of up to 64 bits (or unsigned of up to 32): declared
// INTEGER it becomes SQLite's rowid, and the table needs no separate primary
// key index (every write then costs one b-tree instead of two). A BIGINT
// UNSIGNED key is left alone: its values above 2^63-1 fit no rowid.
func rowidColumn(parts [][]mysqltok.Token) string {
	var name string
	n := 0
	for _, el := range parts {
		if len(el) == 0 {
			continue
		}
		if mysqltok.Words(el, "PRIMARY", "KEY") {
			if len(el) < 4 || !el[2].Is('(') || !el[3].IsName() || len(el) < 5 || !el[4].Is(')') {
				return "" // several columns, or a prefix or order
			}
			name = el[3].Name()
			n++
			continue
		}
		for j := 1; j+1 < len(el); j++ {
			if el[j].Word() == "PRIMARY" && el[j+1].Word() == "KEY" && el[0].IsName() {
				name = el[0].Name()
				n++
			}
		}
	}
	if n != 1 {
		return ""
	}
	for _, el := range parts {
		if len(el) < 2 || !el[0].IsName() || el[0].Name() != name {
			continue
		}
		switch el[1].Word() {
		case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER":
			return name
		case "BIGINT":
			for _, t := range el {
				if t.Word() == "UNSIGNED" {
					return ""
				}
			}
			return name
		}
	}
	return ""
}

// asInteger gives a column definition the type INTEGER, dropping the
// display width.
func asInteger(el []mysqltok.Token) []mysqltok.Token {
	out := append([]mysqltok.Token{el[0], {Kind: mysqltok.Word, Text: "INTEGER"}}, el[2:]...)
	if len(out) > 2 && out[2].Is('(') {
		if e := mysqltok.Closing(out, 2); e >= 0 {
			out = append(out[:2], out[e+1:]...)
		}
	}
	return out
}

// inlineIndex turns "[name] (cols) [USING …]" of a CREATE or ALTER TABLE
// into a CREATE INDEX. An index without a name gets MySQL's: its first
// column's, with _2, _3, … when names (lower-case, of the table's indexes
// so far) has it; names records the name taken.
func inlineIndex(table, unique, ifNot string, toks []mysqltok.Token, names map[string]bool) (Stmt, error) {
	name := ""
	if len(toks) > 0 && toks[0].IsName() {
		name, toks = toks[0].Name(), toks[1:]
	}
	if len(toks) == 0 || !toks[0].Is('(') {
		return Stmt{}, fmt.Errorf("%w: index definition", apply.ErrUnsupportedDDL)
	}
	end := mysqltok.Closing(toks, 0)
	if end < 0 {
		return Stmt{}, fmt.Errorf("%w: unbalanced parentheses", apply.ErrUnsupportedDDL)
	}
	cols, err := indexColumns(toks[1:end])
	if err != nil {
		return Stmt{}, err
	}
	if name == "" {
		name = toks[1].Name()
		for n := 2; names[strings.ToLower(name)]; n++ {
			name = toks[1].Name() + "_" + strconv.Itoa(n)
		}
	}
	names[strings.ToLower(name)] = true
	return createIndex(unique, ifNot, table, name, cols), nil
}

// constraintUnique returns "[name] (cols) …" of CONSTRAINT [sym] UNIQUE
// [KEY|INDEX] [name] (cols), the index named by name, else by sym; nil for
// other constraints.
func constraintUnique(el []mysqltok.Token) []mysqltok.Token {
	i := 1
	var sym []mysqltok.Token
	if i < len(el) && el[i].IsName() && el[i].Word() != "UNIQUE" {
		sym = el[i : i+1]
		i++
	}
	if i >= len(el) || el[i].Word() != "UNIQUE" {
		return nil
	}
	rest := el[i+1:]
	if len(rest) > 0 && (rest[0].Word() == "KEY" || rest[0].Word() == "INDEX") {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0].Is('(') && sym != nil {
		rest = append(sym[:1:1], rest...)
	}
	return rest
}

// cleanConstraint drops "USING BTREE|HASH" and the KEY/INDEX word of a
// UNIQUE constraint, and the name MySQL allows after UNIQUE KEY.
func cleanConstraint(el []mysqltok.Token) []mysqltok.Token {
	out := el[:0:0]
	for i := 0; i < len(el); i++ {
		switch {
		case el[i].Word() == "USING" && i+1 < len(el):
			i++
			continue
		case el[i].Word() == "UNIQUE" && i+1 < len(el) && (el[i+1].Word() == "KEY" || el[i+1].Word() == "INDEX"):
			out = append(out, el[i])
			i++
			if i+1 < len(el) && el[i+1].IsName() {
				i++
			}
			continue
		}
		out = append(out, el[i])
	}
	return out
}

// columnDef cleans one column definition: the type is declared so that
// SQLite keeps the values the sink binds exactly (see types.go), DEFAULT
// values are converted to what MySQL stores, and the attributes SQLite lacks
// are dropped: UNSIGNED, SIGNED, ZEROFILL, AUTO_INCREMENT, CHARACTER SET x,
// CHARSET x, COLLATE x (but SQLite's BINARY, NOCASE, RTRIM), COMMENT '…',
// ON UPDATE CURRENT_TIMESTAMP, and the precision of CURRENT_TIMESTAMP(n).
// unique reports a SERIAL or UNIQUE column, whose UNIQUE index the caller
// creates.
func columnDef(el []mysqltok.Token) (def string, unique bool, err error) {
	if !el[0].IsName() {
		return "", false, fmt.Errorf("%w: column definition %q", apply.ErrUnsupportedDDL, mysqltok.Spaced(el))
	}
	ct, err := parseType(el)
	if err != nil {
		return "", false, err
	}
	out := append([]mysqltok.Token{{Kind: mysqltok.Ident, Text: quote(el[0].Name())}}, ct.decl...)
	if ct.class == serial {
		out = append(out, mysqltok.Token{Kind: mysqltok.Word, Text: "NOT"}, mysqltok.Token{Kind: mysqltok.Word, Text: "NULL"})
	}
	uniqueAttr := false
	for i := ct.end; i < len(el); i++ {
		w := el[i].Word()
		switch {
		case w == "UNIQUE":
			// A UNIQUE index named after the column, made by the caller:
			// SQLite's own for a UNIQUE column would have another name.
			uniqueAttr = true
			if i+1 < len(el) && el[i+1].Word() == "KEY" {
				i++
			}
			continue
		case w == "UNSIGNED" || w == "SIGNED" || w == "ZEROFILL" || w == "AUTO_INCREMENT" || w == "AUTO_RANDOM" ||
			w == "BINARY" && i == ct.end: // CHAR(n) BINARY: a _bin collation
			if i+1 < len(el) && el[i+1].Is('(') { // AUTO_RANDOM(5)
				if e := mysqltok.Closing(el, i+1); e >= 0 {
					i = e
				}
			}
			continue
		case w == "CHARACTER" && i+2 < len(el) && el[i+1].Word() == "SET":
			i += 2
			continue
		case w == "CHARSET" && i+1 < len(el):
			i++
			continue
		case w == "COLLATE" && i+1 < len(el):
			switch strings.ToUpper(el[i+1].Name()) {
			case "BINARY", "NOCASE", "RTRIM":
				out = append(out, el[i], el[i+1])
			}
			i++
			continue
		case w == "COMMENT" && i+1 < len(el) && el[i+1].Kind == mysqltok.String:
			i++
			continue
		case w == "DEFAULT":
			v, n, err := ct.defaultValue(el[i+1:])
			if err != nil {
				return "", false, fmt.Errorf("column %s: %w", el[0].Name(), err)
			}
			if n > 0 {
				out = append(append(out, el[i]), v...)
				i += n
				continue
			}
		case w == "ON" && i+2 < len(el) && el[i+1].Word() == "UPDATE":
			i += 2
			if i+1 < len(el) && el[i+1].Is('(') {
				if e := mysqltok.Closing(el, i+1); e >= 0 {
					i = e
				}
			}
			continue
		case w == "CURRENT_TIMESTAMP" || w == "NOW" || w == "LOCALTIMESTAMP":
			out = append(out, mysqltok.Token{Kind: mysqltok.Word, Text: "CURRENT_TIMESTAMP"})
			if i+1 < len(el) && el[i+1].Is('(') {
				if e := mysqltok.Closing(el, i+1); e >= 0 {
					i = e
				}
			}
			continue
		case el[i].Kind == mysqltok.String:
			// A MySQL string (backslash escapes) as a SQLite one.
			v, err := mysqlString(el[i].Text)
			if err != nil {
				return "", false, err
			}
			out = append(out, mysqltok.Token{Kind: mysqltok.String, Text: sqliteString(v)})
			continue
		}
		out = append(out, el[i])
	}
	return mysqltok.Spaced(out), ct.class == serial || uniqueAttr, nil
}

// sqliteAlterTable: ALTER TABLE t spec[, spec…], one SQLite statement per
// spec. Supported specs: ADD [COLUMN] def, ADD [UNIQUE] INDEX|KEY …, DROP
// [COLUMN] c, DROP INDEX|KEY i, RENAME [TO|AS] u, RENAME COLUMN a TO b.
func sqliteAlterTable(toks []mysqltok.Token) ([]Stmt, error) {
	if len(toks) < 4 || !toks[2].IsName() {
		return nil, fmt.Errorf("%w: ALTER TABLE form", apply.ErrUnsupportedDDL)
	}
	table := toks[2].Name()
	prefix := "ALTER TABLE " + quote(table) + " "
	var out []Stmt
	var rename *Stmt
	names := map[string]bool{}
	for _, spec := range mysqltok.SplitTop(toks[3:]) {
		if len(spec) == 0 {
			continue
		}
		w := spec[0].Word()
		rest := spec[1:]
		index := func(unique string, rest []mysqltok.Token) error {
			if len(rest) > 0 && (rest[0].Word() == "INDEX" || rest[0].Word() == "KEY") {
				rest = rest[1:]
			}
			s, err := inlineIndex(table, unique, "", rest, names)
			// An index without a name takes one MySQL picks among the
			// table's indexes, which the caller knows.
			if len(rest) > 1 && rest[0].Is('(') {
				s.Auto = rest[1].Name()
			}
			out = append(out, s)
			return err
		}
		switch {
		case w == "ADD" && len(rest) > 0 && (rest[0].Word() == "INDEX" || rest[0].Word() == "KEY"):
			if err := index("", rest); err != nil {
				return nil, err
			}
		case w == "ADD" && len(rest) > 0 && rest[0].Word() == "UNIQUE":
			if err := index("UNIQUE ", rest[1:]); err != nil {
				return nil, err
			}
		case w == "ADD" && len(rest) > 0 && rest[0].Word() == "CONSTRAINT" && constraintUnique(rest) != nil:
			if err := index("UNIQUE ", constraintUnique(rest)); err != nil {
				return nil, err
			}
		case w == "ADD" && len(rest) > 0 && (rest[0].Word() == "FULLTEXT" || rest[0].Word() == "SPATIAL"):
			// A plain index, as in CREATE TABLE.
			if err := index("", rest[1:]); err != nil {
				return nil, err
			}
		case w == "ADD":
			if len(rest) > 0 && rest[0].Word() == "COLUMN" {
				rest = rest[1:]
			}
			if len(rest) == 0 || rest[0].Is('(') || mysqltok.Words(rest, "PRIMARY") || mysqltok.Words(rest, "CONSTRAINT") || mysqltok.Words(rest, "FOREIGN") ||
				mysqltok.Words(rest, "PARTITION") || mysqltok.Words(rest, "CHECK") {
				return nil, fmt.Errorf("%w: ALTER TABLE ADD %s", apply.ErrUnsupportedDDL, mysqltok.Spaced(rest))
			}
			if n := len(rest); n >= 2 && (rest[n-2].Word() == "AFTER") || n >= 1 && rest[n-1].Word() == "FIRST" {
				return nil, fmt.Errorf("%w: column position (FIRST, AFTER): SQLite only appends columns", apply.ErrUnsupportedDDL)
			}
			def, unique, err := columnDef(rest)
			if err != nil {
				return nil, err
			}
			out = append(out, other(prefix+"ADD COLUMN "+def))
			if unique {
				// SQLite adds no UNIQUE column; MySQL names the index
				// after the column.
				c := rest[0].Name()
				names[strings.ToLower(c)] = true
				out = append(out, createIndex("UNIQUE ", "", table, c, quote(c)))
			}
		case w == "DROP" && len(rest) == 2 && (rest[0].Word() == "INDEX" || rest[0].Word() == "KEY") && rest[1].IsName():
			s, err := dropIndex(table, rest[1].Name())
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		case w == "DROP" && len(rest) == 2 && rest[0].Word() == "COLUMN" && rest[1].IsName(),
			w == "DROP" && len(rest) == 1 && rest[0].IsName() && rest[0].Word() != "PRIMARY":
			c := rest[len(rest)-1].Name()
			out = append(out, Stmt{SQL: prefix + "DROP COLUMN " + quote(c), Op: OpDropColumn, Table: table, Column: c})
		case w == "RENAME" && len(rest) == 4 && rest[0].Word() == "COLUMN" && rest[1].IsName() && rest[2].Word() == "TO" && rest[3].IsName():
			out = append(out, other(prefix+"RENAME COLUMN "+quote(rest[1].Name())+" TO "+quote(rest[3].Name())))
		case w == "RENAME" && len(rest) == 4 && (rest[0].Word() == "INDEX" || rest[0].Word() == "KEY") && rest[1].IsName() &&
			rest[2].Word() == "TO" && rest[3].IsName():
			if strings.EqualFold(rest[1].Name(), "PRIMARY") || strings.EqualFold(rest[3].Name(), "PRIMARY") {
				return nil, fmt.Errorf("%w: renaming an index to or from PRIMARY", apply.ErrUnsupportedDDL)
			}
			// SQLite renames no index: the caller drops it and creates it
			// again under the new name.
			out = append(out, Stmt{Op: OpRenameIndex, Table: table, Index: IndexName(table, rest[1].Name()), To: IndexName(table, rest[3].Name())})
		case w == "RENAME" && len(rest) >= 1 && rest[0].Word() != "INDEX" && rest[0].Word() != "KEY":
			if rest[0].Word() == "TO" || rest[0].Word() == "AS" {
				rest = rest[1:]
			}
			if len(rest) != 1 || !rest[0].IsName() || rename != nil {
				return nil, fmt.Errorf("%w: ALTER TABLE RENAME form", apply.ErrUnsupportedDDL)
			}
			r := renameTable(table, rest[0].Name())
			rename = &r
		default:
			return nil, fmt.Errorf("%w: ALTER TABLE %s (SQLite alters tables by ADD COLUMN, DROP COLUMN, RENAME only)", apply.ErrUnsupportedDDL, mysqltok.Spaced(spec))
		}
	}
	// The other specs name the table by its old name: MySQL renames it
	// after them.
	if rename != nil {
		out = append(out, *rename)
	}
	return out, nil
}

// RecreateIndex rewrites the SQL of an index as sqlite_master holds it
// (CREATE [UNIQUE] INDEX [IF NOT EXISTS] name ON table …) to create it
// under another name on another table, the rest kept as it is.
func RecreateIndex(sql, name, table string) (string, error) {
	all, err := mysqltok.TokenizeANSI(sql)
	if err != nil {
		return "", fmt.Errorf("index SQL %q: %v", sql, err)
	}
	var out []mysqltok.Token
	state := 0 // 0: before the index name, 1: before ON, 2: before the table, 3: the rest
	for _, t := range all {
		switch {
		case t.Kind == mysqltok.Space || state == 3:
		case state == 0 && t.IsName() && t.Word() != "CREATE" && t.Word() != "UNIQUE" && t.Word() != "INDEX" &&
			t.Word() != "IF" && t.Word() != "NOT" && t.Word() != "EXISTS":
			t, state = mysqltok.Token{Kind: mysqltok.Ident, Text: quote(name)}, 1
		case state == 1 && t.Word() == "ON":
			state = 2
		case state == 2 && t.IsName():
			t, state = mysqltok.Token{Kind: mysqltok.Ident, Text: quote(table)}, 3
		case state == 0:
		default:
			return "", fmt.Errorf("index SQL %q: not CREATE INDEX name ON table", sql)
		}
		out = append(out, t)
	}
	if state != 3 || !mysqltok.Words(mysqltok.Solid(all), "CREATE") {
		return "", fmt.Errorf("index SQL %q: not CREATE INDEX name ON table", sql)
	}
	return mysqltok.Join(out), nil
}
