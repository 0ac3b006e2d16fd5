package sqliteddl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// This file turns a MySQL DDL into what SQLite can run. It is a token-level
// rewrite, not a parser: it knows the few statement forms a redo log's DDLs
// take (apply/sqlite's package doc lists them) and fails with
// apply.ErrUnsupportedDDL on the forms SQLite has no equivalent for, rather
// than guess.

type tokKind uint8

const (
	tokSpace  tokKind = iota // white space or a comment
	tokWord                  // a bare word or number
	tokIdent                 // a `quoted` or "quoted" identifier
	tokString                // a 'string'
	tokPunct                 // one character of punctuation
)

type token struct {
	kind tokKind
	text string
}

// word returns the upper-cased text of a bare word, "" otherwise.
func (t token) word() string {
	if t.kind != tokWord {
		return ""
	}
	return strings.ToUpper(t.text)
}

// name returns an identifier's name: a bare word as is, a quoted one
// unquoted.
func (t token) name() string {
	switch t.kind {
	case tokWord:
		return t.text
	case tokIdent:
		q := t.text[0]
		return strings.ReplaceAll(t.text[1:len(t.text)-1], string([]byte{q, q}), string(q))
	}
	return ""
}

func (t token) isName() bool { return t.kind == tokWord || t.kind == tokIdent }

func (t token) is(p byte) bool { return t.kind == tokPunct && t.text[0] == p }

// tokenize splits MySQL text into tokens. Quoted strings and identifiers end
// at their closing quote (doubled quotes and backslash escapes stay inside);
// comments (--, #, /* */) are space.
func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			for i < len(s) && strings.IndexByte(" \t\n\r", s[i]) >= 0 {
				i++
			}
			toks = append(toks, token{tokSpace, s[start:i]})
		case c == '#' || c == '-' && strings.HasPrefix(s[i:], "-- "):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			toks = append(toks, token{tokSpace, " "})
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("unterminated comment")
			}
			i += end + 4
			// TiDB writes its extensions as /*T![feature] ... */
			// comments; SQLite skips them like any comment.
			toks = append(toks, token{tokSpace, " "})
		case c == '\'' || c == '"' || c == '`':
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated quote %c", c)
				}
				if s[i] == '\\' && c != '`' {
					i += 2
					continue
				}
				if s[i] == c {
					if i+1 < len(s) && s[i+1] == c {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
			k := tokIdent
			if c == '\'' {
				k = tokString
			}
			toks = append(toks, token{k, s[start:i]})
		case isWordByte(c):
			for i < len(s) && isWordByte(s[i]) {
				i++
			}
			toks = append(toks, token{tokWord, s[start:i]})
		default:
			i++
			toks = append(toks, token{tokPunct, s[start:i]})
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// join renders tokens back to text.
func join(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.text)
	}
	return strings.TrimSpace(b.String())
}

// solid drops space tokens, and a trailing ';'.
func solid(toks []token) []token {
	out := make([]token, 0, len(toks))
	for _, t := range toks {
		if t.kind != tokSpace {
			out = append(out, t)
		}
	}
	for len(out) > 0 && out[len(out)-1].is(';') {
		out = out[:len(out)-1]
	}
	return out
}

// spaced renders solid tokens with a space between words.
func spaced(toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && !t.is(',') && !t.is(')') && !t.is('.') && !toks[i-1].is('(') && !toks[i-1].is('.') {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
	}
	return b.String()
}

// words reports whether toks starts with the given upper-case words.
func words(toks []token, ws ...string) bool {
	if len(toks) < len(ws) {
		return false
	}
	for i, w := range ws {
		if toks[i].word() != w {
			return false
		}
	}
	return true
}

// splitTop splits toks at commas outside parentheses.
func splitTop(toks []token) [][]token {
	var parts [][]token
	depth, start := 0, 0
	for i, t := range toks {
		switch {
		case t.is('('):
			depth++
		case t.is(')'):
			depth--
		case t.is(',') && depth == 0:
			parts = append(parts, toks[start:i])
			start = i + 1
		}
	}
	return append(parts, toks[start:])
}

// closing returns the index of the ')' matching the '(' at open, or -1.
func closing(toks []token, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch {
		case toks[i].is('('):
			depth++
		case toks[i].is(')'):
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// unqualify drops "schema." before names, for the schemas of the DDL: SQLite
// has one namespace per file.
func unqualify(toks []token, schemas map[string]bool) []token {
	out := toks[:0:0]
	for i := 0; i < len(toks); i++ {
		if toks[i].isName() && schemas[toks[i].name()] && i+2 < len(toks) && toks[i+1].is('.') && toks[i+2].isName() &&
			(i == 0 || !toks[i-1].is('.')) {
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
)

// Stmt is one SQLite statement of a rewritten DDL.
type Stmt struct {
	SQL   string
	Op    Op
	Table string // the table it acts on, unquoted
	To    string // OpRenameTable, OpRenameIndex: the new name
	Index string // OpCreateIndex, OpDropIndex, OpRenameIndex: the index's SQLite name, unquoted
	// Auto (OpCreateIndex) is the first column of an index that had no
	// name in the DDL: MySQL names it so, or adds _2, _3, … when the table
	// has an index of that name already, which the caller knows.
	Auto string
}

func other(sql string) Stmt { return Stmt{SQL: sql} }

// Rewrite rewrites a MySQL DDL into the SQLite statements that do the same,
// or fails with apply.ErrUnsupportedDDL. No statements means nothing to do.
func Rewrite(ddl *codec.DDL) ([]Stmt, error) {
	all, err := tokenize(ddl.Query)
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
	toks := unqualify(solid(all), schemas)
	unsupported := func(why string) ([]Stmt, error) {
		return nil, fmt.Errorf("%w: %s", apply.ErrUnsupportedDDL, why)
	}
	switch {
	case len(toks) == 0:
		return nil, nil
	case words(toks, "CREATE", "DATABASE"), words(toks, "CREATE", "SCHEMA"):
		return nil, nil // schemas are ignored: every table is in the one file
	case words(toks, "DROP", "DATABASE"), words(toks, "DROP", "SCHEMA"):
		return unsupported("SQLite keeps no schemas, so it cannot drop one")
	case words(toks, "TRUNCATE"):
		rest := toks[1:]
		if words(rest, "TABLE") {
			rest = rest[1:]
		}
		if len(rest) != 1 || !rest[0].isName() {
			return unsupported("TRUNCATE of anything but one table")
		}
		return []Stmt{other("DELETE FROM " + quote(rest[0].name()))}, nil
	case words(toks, "RENAME", "TABLE"):
		var out []Stmt
		for _, pair := range splitTop(toks[2:]) {
			if len(pair) != 3 || !pair[0].isName() || pair[1].word() != "TO" || !pair[2].isName() {
				return unsupported("RENAME TABLE form")
			}
			out = append(out, renameTable(pair[0].name(), pair[2].name()))
		}
		return out, nil
	case words(toks, "DROP", "TABLE"), words(toks, "DROP", "VIEW"):
		// SQLite drops one table per statement.
		rest, ifExists := toks[2:], ""
		if words(rest, "IF", "EXISTS") {
			rest, ifExists = rest[2:], "IF EXISTS "
		}
		for len(rest) > 0 && (rest[len(rest)-1].word() == "CASCADE" || rest[len(rest)-1].word() == "RESTRICT") {
			rest = rest[:len(rest)-1]
		}
		var out []Stmt
		for _, t := range splitTop(rest) {
			if len(t) != 1 || !t[0].isName() {
				return unsupported("DROP form")
			}
			out = append(out, Stmt{SQL: "DROP " + toks[1].word() + " " + ifExists + quote(t[0].name()), Op: OpDropTable, Table: t[0].name()})
		}
		return out, nil
	case words(toks, "DROP", "INDEX"):
		// DROP INDEX i ON t
		if len(toks) < 5 || !toks[2].isName() || toks[3].word() != "ON" || !toks[4].isName() {
			return unsupported("DROP INDEX form")
		}
		s, err := dropIndex(toks[4].name(), toks[2].name())
		if err != nil {
			return nil, err
		}
		return []Stmt{s}, nil
	case words(toks, "CREATE", "INDEX"), words(toks, "CREATE", "UNIQUE", "INDEX"),
		words(toks, "CREATE", "FULLTEXT", "INDEX"), words(toks, "CREATE", "SPATIAL", "INDEX"):
		return sqliteCreateIndex(toks)
	case words(toks, "CREATE", "TABLE"):
		return sqliteCreateTable(toks)
	case words(toks, "ALTER", "TABLE"):
		return sqliteAlterTable(toks)
	}
	// Anything else (CREATE VIEW, …) runs as logged; SQLite's error, if
	// any, names the problem.
	return []Stmt{other(join(all))}, nil
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
func sqliteCreateIndex(toks []token) ([]Stmt, error) {
	i := 1
	unique := ""
	switch toks[i].word() {
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
	if words(toks[i:], "IF", "NOT", "EXISTS") {
		ifNot = "IF NOT EXISTS "
		i += 3
	}
	if i+3 >= len(toks) || !toks[i].isName() || toks[i+1].word() != "ON" || !toks[i+2].isName() || !toks[i+3].is('(') {
		return nil, fmt.Errorf("%w: CREATE INDEX form", apply.ErrUnsupportedDDL)
	}
	idx, table := toks[i].name(), toks[i+2].name()
	end := closing(toks, i+3)
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
func indexColumns(toks []token) (string, error) {
	var parts []string
	for _, col := range splitTop(toks) {
		if len(col) == 0 || !col[0].isName() {
			return "", fmt.Errorf("%w: index part that is not a column", apply.ErrUnsupportedDDL)
		}
		s := quote(col[0].name())
		rest := col[1:]
		if len(rest) > 0 && rest[0].is('(') {
			if e := closing(rest, 0); e >= 0 {
				rest = rest[e+1:]
			}
		}
		if len(rest) == 1 && (rest[0].word() == "ASC" || rest[0].word() == "DESC") {
			s += " " + rest[0].word()
		} else if len(rest) > 0 {
			return "", fmt.Errorf("%w: index part %q", apply.ErrUnsupportedDDL, spaced(col))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", "), nil
}

// sqliteCreateTable: CREATE TABLE [IF NOT EXISTS] t (elements) [options]. The
// table options are dropped, column definitions lose MySQL-only attributes,
// and inline KEY/INDEX elements become CREATE INDEX statements.
func sqliteCreateTable(toks []token) ([]Stmt, error) {
	i := 2
	ifNot := ""
	if words(toks[i:], "IF", "NOT", "EXISTS") {
		ifNot = "IF NOT EXISTS "
		i += 3
	}
	if i+1 >= len(toks) || !toks[i].isName() {
		return nil, fmt.Errorf("%w: CREATE TABLE form", apply.ErrUnsupportedDDL)
	}
	table := toks[i].name()
	if !toks[i+1].is('(') {
		return nil, fmt.Errorf("%w: CREATE TABLE without a column list (LIKE, AS SELECT)", apply.ErrUnsupportedDDL)
	}
	end := closing(toks, i+1)
	if end < 0 {
		return nil, fmt.Errorf("%w: unbalanced parentheses", apply.ErrUnsupportedDDL)
	}
	var elems []string
	var after []Stmt
	names := map[string]bool{}
	parts := splitTop(toks[i+2 : end])
	rowid := rowidColumn(parts)
	index := func(unique string, el []token) error {
		s, err := inlineIndex(table, unique, "IF NOT EXISTS ", el, names)
		after = append(after, s)
		return err
	}
	for _, el := range parts {
		if len(el) == 0 {
			continue
		}
		switch {
		case el[0].word() == "KEY" || el[0].word() == "INDEX":
			if err := index("", el[1:]); err != nil {
				return nil, err
			}
		case el[0].word() == "UNIQUE":
			rest := el[1:]
			if len(rest) > 0 && (rest[0].word() == "KEY" || rest[0].word() == "INDEX") {
				rest = rest[1:]
			}
			if err := index("UNIQUE ", rest); err != nil {
				return nil, err
			}
		case el[0].word() == "FULLTEXT" || el[0].word() == "SPATIAL":
			// A plain index: it changes no result, and a later DROP INDEX
			// finds it.
			rest := el[1:]
			if len(rest) > 0 && (rest[0].word() == "KEY" || rest[0].word() == "INDEX") {
				rest = rest[1:]
			}
			if err := index("", rest); err != nil {
				return nil, err
			}
		case el[0].word() == "CONSTRAINT" && constraintUnique(el) != nil:
			if err := index("UNIQUE ", constraintUnique(el)); err != nil {
				return nil, err
			}
		case el[0].word() == "PRIMARY" || el[0].word() == "CONSTRAINT" || el[0].word() == "CHECK" || el[0].word() == "FOREIGN":
			elems = append(elems, spaced(cleanConstraint(el)))
		default:
			if el[0].isName() && el[0].name() == rowid {
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
				c := el[0].name()
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
func rowidColumn(parts [][]token) string {
	var name string
	n := 0
	for _, el := range parts {
		if len(el) == 0 {
			continue
		}
		if words(el, "PRIMARY", "KEY") {
			if len(el) < 4 || !el[2].is('(') || !el[3].isName() || len(el) < 5 || !el[4].is(')') {
				return "" // several columns, or a prefix or order
			}
			name = el[3].name()
			n++
			continue
		}
		for j := 1; j+1 < len(el); j++ {
			if el[j].word() == "PRIMARY" && el[j+1].word() == "KEY" && el[0].isName() {
				name = el[0].name()
				n++
			}
		}
	}
	if n != 1 {
		return ""
	}
	for _, el := range parts {
		if len(el) < 2 || !el[0].isName() || el[0].name() != name {
			continue
		}
		switch el[1].word() {
		case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "INTEGER":
			return name
		case "BIGINT":
			for _, t := range el {
				if t.word() == "UNSIGNED" {
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
func asInteger(el []token) []token {
	out := append([]token{el[0], {tokWord, "INTEGER"}}, el[2:]...)
	if len(out) > 2 && out[2].is('(') {
		if e := closing(out, 2); e >= 0 {
			out = append(out[:2], out[e+1:]...)
		}
	}
	return out
}

// inlineIndex turns "[name] (cols) [USING …]" of a CREATE or ALTER TABLE
// into a CREATE INDEX. An index without a name gets MySQL's: its first
// column's, with _2, _3, … when names (lower-case, of the table's indexes
// so far) has it; names records the name taken.
func inlineIndex(table, unique, ifNot string, toks []token, names map[string]bool) (Stmt, error) {
	name := ""
	if len(toks) > 0 && toks[0].isName() {
		name, toks = toks[0].name(), toks[1:]
	}
	if len(toks) == 0 || !toks[0].is('(') {
		return Stmt{}, fmt.Errorf("%w: index definition", apply.ErrUnsupportedDDL)
	}
	end := closing(toks, 0)
	if end < 0 {
		return Stmt{}, fmt.Errorf("%w: unbalanced parentheses", apply.ErrUnsupportedDDL)
	}
	cols, err := indexColumns(toks[1:end])
	if err != nil {
		return Stmt{}, err
	}
	if name == "" {
		name = toks[1].name()
		for n := 2; names[strings.ToLower(name)]; n++ {
			name = toks[1].name() + "_" + strconv.Itoa(n)
		}
	}
	names[strings.ToLower(name)] = true
	return createIndex(unique, ifNot, table, name, cols), nil
}

// constraintUnique returns "[name] (cols) …" of CONSTRAINT [sym] UNIQUE
// [KEY|INDEX] [name] (cols), the index named by name, else by sym; nil for
// other constraints.
func constraintUnique(el []token) []token {
	i := 1
	var sym []token
	if i < len(el) && el[i].isName() && el[i].word() != "UNIQUE" {
		sym = el[i : i+1]
		i++
	}
	if i >= len(el) || el[i].word() != "UNIQUE" {
		return nil
	}
	rest := el[i+1:]
	if len(rest) > 0 && (rest[0].word() == "KEY" || rest[0].word() == "INDEX") {
		rest = rest[1:]
	}
	if len(rest) > 0 && rest[0].is('(') && sym != nil {
		rest = append(sym[:1:1], rest...)
	}
	return rest
}

// cleanConstraint drops "USING BTREE|HASH" and the KEY/INDEX word of a
// UNIQUE constraint, and the name MySQL allows after UNIQUE KEY.
func cleanConstraint(el []token) []token {
	out := el[:0:0]
	for i := 0; i < len(el); i++ {
		switch {
		case el[i].word() == "USING" && i+1 < len(el):
			i++
			continue
		case el[i].word() == "UNIQUE" && i+1 < len(el) && (el[i+1].word() == "KEY" || el[i+1].word() == "INDEX"):
			out = append(out, el[i])
			i++
			if i+1 < len(el) && el[i+1].isName() {
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
func columnDef(el []token) (def string, unique bool, err error) {
	if !el[0].isName() {
		return "", false, fmt.Errorf("%w: column definition %q", apply.ErrUnsupportedDDL, spaced(el))
	}
	ct, err := parseType(el)
	if err != nil {
		return "", false, err
	}
	out := append([]token{{tokIdent, quote(el[0].name())}}, ct.decl...)
	if ct.class == serial {
		out = append(out, token{tokWord, "NOT"}, token{tokWord, "NULL"})
	}
	uniqueAttr := false
	for i := ct.end; i < len(el); i++ {
		w := el[i].word()
		switch {
		case w == "UNIQUE":
			// A UNIQUE index named after the column, made by the caller:
			// SQLite's own for a UNIQUE column would have another name.
			uniqueAttr = true
			if i+1 < len(el) && el[i+1].word() == "KEY" {
				i++
			}
			continue
		case w == "UNSIGNED" || w == "SIGNED" || w == "ZEROFILL" || w == "AUTO_INCREMENT" || w == "AUTO_RANDOM" ||
			w == "BINARY" && i == ct.end: // CHAR(n) BINARY: a _bin collation
			if i+1 < len(el) && el[i+1].is('(') { // AUTO_RANDOM(5)
				if e := closing(el, i+1); e >= 0 {
					i = e
				}
			}
			continue
		case w == "CHARACTER" && i+2 < len(el) && el[i+1].word() == "SET":
			i += 2
			continue
		case w == "CHARSET" && i+1 < len(el):
			i++
			continue
		case w == "COLLATE" && i+1 < len(el):
			switch strings.ToUpper(el[i+1].name()) {
			case "BINARY", "NOCASE", "RTRIM":
				out = append(out, el[i], el[i+1])
			}
			i++
			continue
		case w == "COMMENT" && i+1 < len(el) && el[i+1].kind == tokString:
			i++
			continue
		case w == "DEFAULT":
			v, n, err := ct.defaultValue(el[i+1:])
			if err != nil {
				return "", false, fmt.Errorf("column %s: %w", el[0].name(), err)
			}
			if n > 0 {
				out = append(append(out, el[i]), v...)
				i += n
				continue
			}
		case w == "ON" && i+2 < len(el) && el[i+1].word() == "UPDATE":
			i += 2
			if i+1 < len(el) && el[i+1].is('(') {
				if e := closing(el, i+1); e >= 0 {
					i = e
				}
			}
			continue
		case w == "CURRENT_TIMESTAMP" || w == "NOW" || w == "LOCALTIMESTAMP":
			out = append(out, token{tokWord, "CURRENT_TIMESTAMP"})
			if i+1 < len(el) && el[i+1].is('(') {
				if e := closing(el, i+1); e >= 0 {
					i = e
				}
			}
			continue
		case el[i].kind == tokString:
			// A MySQL string (backslash escapes) as a SQLite one.
			v, err := mysqlString(el[i].text)
			if err != nil {
				return "", false, err
			}
			out = append(out, token{tokString, sqliteString(v)})
			continue
		}
		out = append(out, el[i])
	}
	return spaced(out), ct.class == serial || uniqueAttr, nil
}

// sqliteAlterTable: ALTER TABLE t spec[, spec…], one SQLite statement per
// spec. Supported specs: ADD [COLUMN] def, ADD [UNIQUE] INDEX|KEY …, DROP
// [COLUMN] c, DROP INDEX|KEY i, RENAME [TO|AS] u, RENAME COLUMN a TO b.
func sqliteAlterTable(toks []token) ([]Stmt, error) {
	if len(toks) < 4 || !toks[2].isName() {
		return nil, fmt.Errorf("%w: ALTER TABLE form", apply.ErrUnsupportedDDL)
	}
	table := toks[2].name()
	prefix := "ALTER TABLE " + quote(table) + " "
	var out []Stmt
	var rename *Stmt
	names := map[string]bool{}
	for _, spec := range splitTop(toks[3:]) {
		if len(spec) == 0 {
			continue
		}
		w := spec[0].word()
		rest := spec[1:]
		index := func(unique string, rest []token) error {
			if len(rest) > 0 && (rest[0].word() == "INDEX" || rest[0].word() == "KEY") {
				rest = rest[1:]
			}
			s, err := inlineIndex(table, unique, "", rest, names)
			// An index without a name takes one MySQL picks among the
			// table's indexes, which the caller knows.
			if len(rest) > 1 && rest[0].is('(') {
				s.Auto = rest[1].name()
			}
			out = append(out, s)
			return err
		}
		switch {
		case w == "ADD" && len(rest) > 0 && (rest[0].word() == "INDEX" || rest[0].word() == "KEY"):
			if err := index("", rest); err != nil {
				return nil, err
			}
		case w == "ADD" && len(rest) > 0 && rest[0].word() == "UNIQUE":
			if err := index("UNIQUE ", rest[1:]); err != nil {
				return nil, err
			}
		case w == "ADD" && len(rest) > 0 && rest[0].word() == "CONSTRAINT" && constraintUnique(rest) != nil:
			if err := index("UNIQUE ", constraintUnique(rest)); err != nil {
				return nil, err
			}
		case w == "ADD" && len(rest) > 0 && (rest[0].word() == "FULLTEXT" || rest[0].word() == "SPATIAL"):
			// A plain index, as in CREATE TABLE.
			if err := index("", rest[1:]); err != nil {
				return nil, err
			}
		case w == "ADD":
			if len(rest) > 0 && rest[0].word() == "COLUMN" {
				rest = rest[1:]
			}
			if len(rest) == 0 || rest[0].is('(') || words(rest, "PRIMARY") || words(rest, "CONSTRAINT") || words(rest, "FOREIGN") ||
				words(rest, "PARTITION") || words(rest, "CHECK") {
				return nil, fmt.Errorf("%w: ALTER TABLE ADD %s", apply.ErrUnsupportedDDL, spaced(rest))
			}
			if n := len(rest); n >= 2 && (rest[n-2].word() == "AFTER") || n >= 1 && rest[n-1].word() == "FIRST" {
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
				c := rest[0].name()
				names[strings.ToLower(c)] = true
				out = append(out, createIndex("UNIQUE ", "", table, c, quote(c)))
			}
		case w == "DROP" && len(rest) == 2 && (rest[0].word() == "INDEX" || rest[0].word() == "KEY") && rest[1].isName():
			s, err := dropIndex(table, rest[1].name())
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		case w == "DROP" && len(rest) == 2 && rest[0].word() == "COLUMN" && rest[1].isName(),
			w == "DROP" && len(rest) == 1 && rest[0].isName() && rest[0].word() != "PRIMARY":
			out = append(out, other(prefix+"DROP COLUMN "+quote(rest[len(rest)-1].name())))
		case w == "RENAME" && len(rest) == 4 && rest[0].word() == "COLUMN" && rest[1].isName() && rest[2].word() == "TO" && rest[3].isName():
			out = append(out, other(prefix+"RENAME COLUMN "+quote(rest[1].name())+" TO "+quote(rest[3].name())))
		case w == "RENAME" && len(rest) == 4 && (rest[0].word() == "INDEX" || rest[0].word() == "KEY") && rest[1].isName() &&
			rest[2].word() == "TO" && rest[3].isName():
			if strings.EqualFold(rest[1].name(), "PRIMARY") || strings.EqualFold(rest[3].name(), "PRIMARY") {
				return nil, fmt.Errorf("%w: renaming an index to or from PRIMARY", apply.ErrUnsupportedDDL)
			}
			// SQLite renames no index: the caller drops it and creates it
			// again under the new name.
			out = append(out, Stmt{Op: OpRenameIndex, Table: table, Index: IndexName(table, rest[1].name()), To: IndexName(table, rest[3].name())})
		case w == "RENAME" && len(rest) >= 1 && rest[0].word() != "INDEX" && rest[0].word() != "KEY":
			if rest[0].word() == "TO" || rest[0].word() == "AS" {
				rest = rest[1:]
			}
			if len(rest) != 1 || !rest[0].isName() || rename != nil {
				return nil, fmt.Errorf("%w: ALTER TABLE RENAME form", apply.ErrUnsupportedDDL)
			}
			r := renameTable(table, rest[0].name())
			rename = &r
		default:
			return nil, fmt.Errorf("%w: ALTER TABLE %s (SQLite alters tables by ADD COLUMN, DROP COLUMN, RENAME only)", apply.ErrUnsupportedDDL, spaced(spec))
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
	all, err := tokenize(sql)
	if err != nil {
		return "", fmt.Errorf("index SQL %q: %v", sql, err)
	}
	var out []token
	state := 0 // 0: before the index name, 1: before ON, 2: before the table, 3: the rest
	for _, t := range all {
		switch {
		case t.kind == tokSpace || state == 3:
		case state == 0 && t.isName() && t.word() != "CREATE" && t.word() != "UNIQUE" && t.word() != "INDEX" &&
			t.word() != "IF" && t.word() != "NOT" && t.word() != "EXISTS":
			t, state = token{tokIdent, quote(name)}, 1
		case state == 1 && t.word() == "ON":
			state = 2
		case state == 2 && t.isName():
			t, state = token{tokIdent, quote(table)}, 3
		case state == 0:
		default:
			return "", fmt.Errorf("index SQL %q: not CREATE INDEX name ON table", sql)
		}
		out = append(out, t)
	}
	if state != 3 || !words(solid(all), "CREATE") {
		return "", fmt.Errorf("index SQL %q: not CREATE INDEX name ON table", sql)
	}
	return join(out), nil
}
