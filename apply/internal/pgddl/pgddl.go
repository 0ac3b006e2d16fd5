package pgddl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redokit/redokit/apply/internal/mysqltok"
	"github.com/redokit/redokit/codec"
)

// Queryer reads the catalog inside the transaction the statements are to run
// in (a *sql.Tx does).
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// errCatalog is wrapped by Rewrite's error for the forms that need the
// catalog: RewriteWith takes them.
var errCatalog = errors.New("needs the downstream's catalog (RewriteWith)")

// Rewrite translates a MySQL DDL into PostgreSQL statements without reading
// the downstream's catalog. The forms that need it (RENAME TABLE, ALTER
// TABLE … RENAME, MODIFY, CHANGE, ALTER COLUMN … SET DEFAULT, CREATE TABLE …
// LIKE, ADD INDEX without a name) fail; the sink uses RewriteWith. A DDL it
// cannot translate fails with an error wrapping apply.ErrUnsupportedDDL that
// names the clause. No statements means nothing to do.
func Rewrite(ddl *codec.DDL) ([]string, error) {
	return rewrite(context.Background(), nil, ddl)
}

// RewriteWith is Rewrite reading the catalog through q, in the transaction
// the statements then run in.
func RewriteWith(ctx context.Context, q Queryer, ddl *codec.DDL) ([]string, error) {
	if q == nil {
		return nil, errors.New("pgddl: RewriteWith without a Queryer")
	}
	return rewrite(ctx, q, ddl)
}

type rewriter struct {
	ctx    context.Context
	q      Queryer
	schema string // of unqualified names
	out    []string
	canon  map[qname]qname // the DDL's tables, by their lower-cased names
	// tables is the catalog as the statements so far leave it, for the
	// renames of one DDL (RENAME TABLE a TO t, b TO a, t TO b).
	tables map[qname]*tableState
}

func rewrite(ctx context.Context, q Queryer, ddl *codec.DDL) ([]string, error) {
	all, err := mysqltok.Tokenize(ddl.Query)
	if err != nil {
		return nil, unsupported("%v", err)
	}
	r := &rewriter{ctx: ctx, q: q, schema: ddl.Table.Schema, tables: map[qname]*tableState{}, canon: map[qname]qname{}}
	// TiDB compares table names ignoring case, and the query may spell
	// them otherwise than the CREATE did; the DDL's table list has them
	// as TiDB keeps them, which is how the row events (and so the
	// downstream) name them.
	known := []codec.TableName{ddl.Table}
	for _, t := range ddl.Tables {
		known = append(known, t.TableName)
	}
	for _, t := range known {
		if t.Schema != "" && t.Name != "" {
			c := qname{t.Schema, t.Name}
			r.canon[c.folded()] = c
		}
	}
	// A query may hold several statements (a batch of CREATE TABLEs).
	toks := mysqltok.Solid(all)
	start := 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) && !toks[i].Is(';') {
			continue
		}
		if err := r.statement(toks[start:i]); err != nil {
			return nil, err
		}
		start = i + 1
	}
	return r.out, nil
}

func (r *rewriter) emit(s ...string) { r.out = append(r.out, s...) }

func (r *rewriter) needCatalog(what string) error {
	if r.q == nil {
		return unsupported("%s %w", what, errCatalog)
	}
	return nil
}

// checkName refuses names PostgreSQL would truncate.
func checkName(names ...string) error {
	for _, n := range names {
		if n == "" {
			return unsupported("empty name")
		}
		if len(n) > maxIdent {
			return unsupported("name %q is longer than PostgreSQL's 63 bytes", n)
		}
	}
	return nil
}

// tableRef reads a [schema.]name at toks[i]; unqualified names are in the
// DDL's schema.
func (r *rewriter) tableRef(toks []mysqltok.Token, i int) (qname, int, error) {
	if i >= len(toks) || !toks[i].IsName() {
		return qname{}, 0, unsupported("expected a table name at %q", mysqltok.Spaced(toks[min(i, len(toks)):]))
	}
	t := qname{r.schema, toks[i].Name()}
	i++
	if i+1 < len(toks) && toks[i].Is('.') && toks[i+1].IsName() {
		t = qname{t.name, toks[i+1].Name()}
		i += 2
	}
	if t.schema == "" {
		return qname{}, 0, unsupported("table %q without a schema, in a DDL without one", t.name)
	}
	if c, ok := r.canon[t.folded()]; ok {
		t = c
	}
	return t, i, checkName(t.schema, t.name)
}

// skipDefinerEtc skips ALGORITHM=…, DEFINER=…, SQL SECURITY … before VIEW.
func skipViewPrefix(toks []mysqltok.Token, i int) int {
	for i < len(toks) {
		switch toks[i].Word() {
		case "ALGORITHM":
			i += 3
		case "DEFINER":
			i += 3
			for i+1 < len(toks) && toks[i].Is('@') {
				i += 2
			}
		case "SQL":
			i += 3
		default:
			return i
		}
	}
	return i
}

func (r *rewriter) statement(toks []mysqltok.Token) error {
	first := func(n int) string { return mysqltok.Spaced(toks[:min(n, len(toks))]) }
	switch {
	case len(toks) == 0:
		return nil
	case mysqltok.Words(toks, "CREATE", "DATABASE"), mysqltok.Words(toks, "CREATE", "SCHEMA"):
		i := 2
		if mysqltok.Words(toks[i:], "IF", "NOT", "EXISTS") {
			i += 3
		}
		if i >= len(toks) || !toks[i].IsName() {
			return unsupported("%s form", first(2))
		}
		if err := checkName(toks[i].Name()); err != nil {
			return err
		}
		r.emit("CREATE SCHEMA IF NOT EXISTS " + quote(toks[i].Name()))
		return nil
	case mysqltok.Words(toks, "DROP", "DATABASE"), mysqltok.Words(toks, "DROP", "SCHEMA"):
		i := 2
		if mysqltok.Words(toks[i:], "IF", "EXISTS") {
			i += 2
		}
		if i+1 != len(toks) || !toks[i].IsName() {
			return unsupported("%s form", first(2))
		}
		// MySQL drops the database's tables with it.
		r.emit("DROP SCHEMA IF EXISTS " + quote(toks[i].Name()) + " CASCADE")
		return nil
	case mysqltok.Words(toks, "ALTER", "DATABASE"), mysqltok.Words(toks, "ALTER", "SCHEMA"):
		// Only character set and collation options: nothing in
		// PostgreSQL, whose text is one encoding.
		for _, t := range toks[2:] {
			switch t.Word() {
			case "CHARACTER", "SET", "CHARSET", "COLLATE", "DEFAULT":
			default:
				if t.Is('=') || t.IsName() && t.Word() != "ENCRYPTION" && t.Word() != "READ" {
					continue
				}
				return unsupported("ALTER DATABASE %s", t.Text)
			}
		}
		return nil
	case mysqltok.Words(toks, "CREATE", "TABLE"):
		return r.createTable(toks)
	case mysqltok.Words(toks, "CREATE", "TEMPORARY"), mysqltok.Words(toks, "DROP", "TEMPORARY"):
		return unsupported("temporary table")
	case mysqltok.Words(toks, "DROP", "TABLE"), mysqltok.Words(toks, "DROP", "VIEW"):
		return r.dropTables(toks)
	case mysqltok.Words(toks, "TRUNCATE"):
		i := 1
		if mysqltok.Words(toks[i:], "TABLE") {
			i++
		}
		t, end, err := r.tableRef(toks, i)
		if err != nil {
			return err
		}
		if end != len(toks) {
			return unsupported("TRUNCATE of anything but one table")
		}
		r.emit("TRUNCATE TABLE " + t.sql())
		return nil
	case mysqltok.Words(toks, "RENAME", "TABLE"), mysqltok.Words(toks, "RENAME", "TABLES"):
		if err := r.needCatalog("RENAME TABLE"); err != nil {
			return err
		}
		for _, pair := range mysqltok.SplitTop(toks[2:]) {
			from, i, err := r.tableRef(pair, 0)
			if err != nil {
				return err
			}
			if i >= len(pair) || pair[i].Word() != "TO" {
				return unsupported("RENAME TABLE form")
			}
			to, j, err := r.tableRef(pair, i+1)
			if err != nil {
				return err
			}
			if j != len(pair) {
				return unsupported("RENAME TABLE form")
			}
			if err := r.rename(from, to); err != nil {
				return err
			}
		}
		return nil
	case mysqltok.Words(toks, "CREATE", "INDEX"), mysqltok.Words(toks, "CREATE", "UNIQUE", "INDEX"):
		return r.createIndex(toks)
	case mysqltok.Words(toks, "CREATE", "FULLTEXT"), mysqltok.Words(toks, "CREATE", "SPATIAL"):
		return unsupported("%s INDEX", toks[1].Word())
	case mysqltok.Words(toks, "DROP", "INDEX"):
		i := 2
		ifExists := mysqltok.Words(toks[i:], "IF", "EXISTS")
		if ifExists {
			i += 2
		}
		if i+2 >= len(toks) || !toks[i].IsName() || toks[i+1].Word() != "ON" {
			return unsupported("DROP INDEX form")
		}
		t, end, err := r.tableRef(toks, i+2)
		if err != nil {
			return err
		}
		if err := lockOptions(toks[end:]); err != nil {
			return err
		}
		return r.dropIndex(t, toks[i].Name(), ifExists)
	case mysqltok.Words(toks, "ALTER", "TABLE"), mysqltok.Words(toks, "ALTER", "IGNORE", "TABLE"):
		i := 2
		if toks[1].Word() == "IGNORE" {
			i = 3
		}
		return r.alterTable(toks, i)
	case mysqltok.Words(toks, "CREATE") || mysqltok.Words(toks, "ALTER"):
		i := 1
		orReplace := mysqltok.Words(toks[i:], "OR", "REPLACE")
		if orReplace {
			i += 2
		}
		i = skipViewPrefix(toks, i)
		if i < len(toks) && toks[i].Word() == "VIEW" {
			return r.createView(toks, i+1)
		}
		return unsupported("%s", first(i+1))
	}
	return unsupported("statement %s", first(2))
}

// lockOptions accepts the ALGORITHM= and LOCK= clauses a DDL may end with.
func lockOptions(toks []mysqltok.Token) error {
	for i := 0; i < len(toks); i++ {
		switch toks[i].Word() {
		case "ALGORITHM", "LOCK":
			i++
			if i < len(toks) && toks[i].Is('=') {
				i++
			}
		default:
			return unsupported("clause %q", mysqltok.Spaced(toks[i:]))
		}
	}
	return nil
}

func (r *rewriter) dropTables(toks []mysqltok.Token) error {
	kind := toks[1].Word()
	rest := toks[2:]
	if mysqltok.Words(rest, "IF", "EXISTS") {
		rest = rest[2:]
	}
	for len(rest) > 0 && (rest[len(rest)-1].Word() == "CASCADE" || rest[len(rest)-1].Word() == "RESTRICT") {
		rest = rest[:len(rest)-1]
	}
	var names []string
	for _, part := range mysqltok.SplitTop(rest) {
		t, end, err := r.tableRef(part, 0)
		if err != nil {
			return err
		}
		if end != len(part) {
			return unsupported("DROP %s form", kind)
		}
		names = append(names, t.sql())
	}
	if len(names) == 0 {
		return unsupported("DROP %s form", kind)
	}
	r.emit("DROP " + kind + " IF EXISTS " + strings.Join(names, ", "))
	return nil
}

// doBlock wraps plpgsql in a DO statement.
func doBlock(body string) string {
	tag := "$redokit$"
	for n := 0; strings.Contains(body, tag); n++ {
		tag = "$redokit" + strconv.Itoa(n) + "$"
	}
	return "DO " + tag + "BEGIN " + body + " END" + tag
}

// The SQLSTATEs of the checks' errors: none is a class a sink may take for
// transient (a retry would fail the same way).
const (
	codeUndefinedObject = "undefined_object"      // 42704: an index or constraint to drop is not there
	codeUndefinedColumn = "undefined_column"      // 42703: a column is there in another case
	codeNotSupported    = "feature_not_supported" // 0A000: rows cannot get the added column's value
)

// raise is a plpgsql RAISE of msg with the condition code.
func raise(code, msg string) string {
	return "RAISE EXCEPTION USING ERRCODE = '" + code + "', MESSAGE = " + literal("redokit: "+msg) + ";"
}

func regclass(s string) string { return "to_regclass(" + literal(s) + ")" }

// hasConstraint is a plpgsql condition: table t has constraint name.
func hasConstraint(t qname, name string) string {
	return "EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = " + regclass(t.sql()) + " AND conname = " + literal(name) + ")"
}

// hasColumn is a plpgsql condition: table t has column c.
func hasColumn(t qname, c string) string {
	return "EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = " + regclass(t.sql()) + " AND attname = " + literal(c) +
		" AND attnum > 0 AND NOT attisdropped)"
}

// indexComment records a hashed index name's MySQL name.
func (r *rewriter) indexComment(t qname, index string) {
	if hashedName(t.name, index) {
		r.emit("COMMENT ON INDEX " + t.in(objectName(t.name, index)) + " IS " + literal(indexCommentPrefix+index))
	}
}

func (r *rewriter) columnComment(t qname, c *column) {
	if c.typ.marker() {
		r.emit("COMMENT ON COLUMN " + t.sql() + "." + quote(c.name) + " IS " + literal(columnCommentPrefix+c.typ.mysql))
	}
}

// dropIndex drops MySQL index idx of t. An index that is not there while its
// table is is an error, unless the DDL said IF EXISTS: the DDL and its
// progress row commit together, so a DROP INDEX that already ran is never run
// again by the apply; a missing index means the index names no longer follow
// the tables (the bug that made a DROP INDEX after a RENAME TABLE pass as
// "already applied" while the index stayed), or a downstream changed by hand.
func (r *rewriter) dropIndex(t qname, idx string, ifExists bool) error {
	if strings.EqualFold(idx, primaryName) {
		return r.dropPrimary(t, ifExists)
	}
	if err := checkName(idx); err != nil {
		return err
	}
	pg := objectName(t.name, idx)
	if !ifExists {
		r.emit(doBlock("IF " + regclass(t.sql()) + " IS NOT NULL AND " + regclass(t.in(pg)) + " IS NULL THEN " +
			raise(codeUndefinedObject, fmt.Sprintf("index %s of table %s (PostgreSQL index %s) does not exist", idx, t, pg)) + " END IF;"))
	}
	r.emit("DROP INDEX IF EXISTS " + t.in(pg))
	r.noteIndex(t, idx, false)
	return nil
}

// noteIndex keeps the catalog read for this DDL up to date with an index
// it adds or drops, for the unnamed indexes of later clauses.
func (r *rewriter) noteIndex(t qname, idx string, add bool) {
	s, ok := r.tables[t]
	if !ok {
		return
	}
	pg := objectName(t.name, idx)
	s.indexes = slices.DeleteFunc(s.indexes, func(ix pgIndex) bool { return ix.pg == pg })
	if add {
		s.exists = true
		s.indexes = append(s.indexes, pgIndex{pg: pg, mysql: idx})
	}
}

func (r *rewriter) dropPrimary(t qname, ifExists bool) error {
	pk := objectName(t.name, primaryName)
	if !ifExists {
		r.emit(doBlock("IF " + regclass(t.sql()) + " IS NOT NULL AND NOT " + hasConstraint(t, pk) + " THEN " +
			raise(codeUndefinedObject, fmt.Sprintf("the primary key of table %s (PostgreSQL constraint %s) does not exist", t, pk)) + " END IF;"))
	}
	r.emit("ALTER TABLE IF EXISTS " + t.sql() + " DROP CONSTRAINT IF EXISTS " + quote(pk))
	return nil
}

// fkName is the PostgreSQL name of foreign key name: its MySQL name, lower
// case (MySQL compares them ignoring case); PostgreSQL's constraint names
// are per table, like MySQL's.
func fkName(name string) string {
	name = strings.ToLower(name)
	return fit(name, "fk\x00"+name)
}

func (r *rewriter) dropForeignKey(t qname, name string, ifExists bool) error {
	fk := fkName(name)
	if !ifExists {
		r.emit(doBlock("IF " + regclass(t.sql()) + " IS NOT NULL AND NOT " + hasConstraint(t, fk) + " THEN " +
			raise(codeUndefinedObject, fmt.Sprintf("foreign key %s of table %s does not exist", name, t)) + " END IF;"))
	}
	r.emit("ALTER TABLE IF EXISTS " + t.sql() + " DROP CONSTRAINT IF EXISTS " + quote(fk))
	return nil
}

// key is an index or constraint definition.
type key struct {
	kind  string   // PRIMARY, UNIQUE, INDEX, FOREIGN, CHECK
	name  string   // the MySQL name; "" when not given
	cols  []string // the key's columns
	parts string   // the rendered key parts
	ref   string   // FOREIGN: the REFERENCES clause
}

// isKey reports whether a table element or ADD spec defines a key rather
// than a column.
func isKey(el []mysqltok.Token) bool {
	switch el[0].Word() {
	case "CONSTRAINT", "PRIMARY", "UNIQUE", "INDEX", "KEY", "FOREIGN", "FULLTEXT", "SPATIAL", "CHECK":
		// A column may be named like these only when quoted, and then
		// it is no word.
		return true
	}
	return false
}

// parseKey reads a key definition (see isKey).
func (r *rewriter) parseKey(el []mysqltok.Token) (*key, error) {
	k := &key{}
	i := 0
	symbol := ""
	if el[0].Word() == "CONSTRAINT" {
		i++
		if i < len(el) && el[i].IsName() && (el[i].Kind == mysqltok.Ident || !isKey(el[i:])) {
			symbol = el[i].Name()
			i++
		}
	}
	if i >= len(el) {
		return nil, unsupported("constraint %q", mysqltok.Spaced(el))
	}
	k.kind = el[i].Word()
	i++
	switch k.kind {
	case "PRIMARY":
		if i >= len(el) || el[i].Word() != "KEY" {
			return nil, unsupported("%q", mysqltok.Spaced(el))
		}
		i++
	case "UNIQUE", "FOREIGN":
		if i < len(el) && (el[i].Word() == "KEY" || el[i].Word() == "INDEX") {
			i++
		}
	case "KEY":
		k.kind = "INDEX"
	case "INDEX":
	case "CHECK":
		return k, nil
	case "FULLTEXT", "SPATIAL":
		return nil, unsupported("%s index", k.kind)
	default:
		return nil, unsupported("constraint %q", mysqltok.Spaced(el))
	}
	if i < len(el) && el[i].IsName() && el[i].Word() != "USING" {
		k.name = el[i].Name()
		i++
	}
	if i+1 < len(el) && el[i].Word() == "USING" {
		i += 2
	}
	if i >= len(el) || !el[i].Is('(') {
		return nil, unsupported("key %q", mysqltok.Spaced(el))
	}
	end := mysqltok.Closing(el, i)
	if end < 0 {
		return nil, unsupported("unbalanced parentheses")
	}
	cols, parts, err := keyParts(el[i+1 : end])
	if err != nil {
		return nil, err
	}
	k.cols, k.parts = cols, parts
	rest := el[end+1:]
	switch k.kind {
	case "FOREIGN":
		if symbol != "" {
			k.name = symbol
		}
		ref, err := r.references(rest)
		if err != nil {
			return nil, err
		}
		k.ref = ref
		return k, nil
	case "UNIQUE":
		if k.name == "" {
			k.name = symbol
		}
	}
	if err := keyOptions(rest); err != nil {
		return nil, err
	}
	return k, nil
}

// keyParts renders an index's key parts. MySQL's prefix lengths are dropped:
// the index is on the whole column (a unique one then accepts every row the
// prefix index did). Functional key parts are not translated.
func keyParts(toks []mysqltok.Token) ([]string, string, error) {
	var cols, parts []string
	for _, col := range mysqltok.SplitTop(toks) {
		name, order, ok := mysqltok.KeyPart(col)
		if !ok {
			return nil, "", unsupported("key part %q", mysqltok.Spaced(col))
		}
		if err := checkName(name); err != nil {
			return nil, "", err
		}
		cols = append(cols, name)
		parts = append(parts, strings.TrimSpace(quote(name)+" "+order))
	}
	return cols, strings.Join(parts, ", "), nil
}

// keyOptions accepts the index options that change nothing PostgreSQL
// keeps.
func keyOptions(toks []mysqltok.Token) error {
	for i := 0; i < len(toks); i++ {
		switch toks[i].Word() {
		case "USING", "KEY_BLOCK_SIZE", "COMMENT", "ALGORITHM", "LOCK":
			i++
			if i < len(toks) && toks[i].Is('=') {
				i++
			}
		case "VISIBLE", "INVISIBLE", "CLUSTERED", "NONCLUSTERED", "GLOBAL", "LOCAL":
		default:
			return unsupported("index option %q", mysqltok.Spaced(toks[i:]))
		}
	}
	return nil
}

// references renders REFERENCES t (cols) [ON DELETE a] [ON UPDATE a]; MATCH is
// dropped (InnoDB and TiDB ignore it).
func (r *rewriter) references(toks []mysqltok.Token) (string, error) {
	if len(toks) == 0 || toks[0].Word() != "REFERENCES" {
		return "", unsupported("FOREIGN KEY without REFERENCES")
	}
	t, i, err := r.tableRef(toks, 1)
	if err != nil {
		return "", err
	}
	if i >= len(toks) || !toks[i].Is('(') {
		return "", unsupported("REFERENCES without columns")
	}
	end := mysqltok.Closing(toks, i)
	if end < 0 {
		return "", unsupported("unbalanced parentheses")
	}
	_, parts, err := keyParts(toks[i+1 : end])
	if err != nil {
		return "", err
	}
	s := "REFERENCES " + t.sql() + " (" + parts + ")"
	for i = end + 1; i < len(toks); i++ {
		switch {
		case toks[i].Word() == "MATCH" && i+1 < len(toks):
			i++
		case toks[i].Word() == "ON" && i+2 < len(toks) && (toks[i+1].Word() == "DELETE" || toks[i+1].Word() == "UPDATE"):
			on := "ON " + toks[i+1].Word() + " "
			i += 2
			switch {
			case toks[i].Word() == "CASCADE" || toks[i].Word() == "RESTRICT":
				s += " " + on + toks[i].Word()
			case i+1 < len(toks) && toks[i].Word() == "SET" && (toks[i+1].Word() == "NULL" || toks[i+1].Word() == "DEFAULT"):
				s += " " + on + "SET " + toks[i+1].Word()
				i++
			case i+1 < len(toks) && toks[i].Word() == "NO" && toks[i+1].Word() == "ACTION":
				s += " " + on + "NO ACTION"
				i++
			default:
				return "", unsupported("referential action %q", mysqltok.Spaced(toks[i:]))
			}
		default:
			return "", unsupported("FOREIGN KEY clause %q", mysqltok.Spaced(toks[i:]))
		}
	}
	return s, nil
}

// column is a parsed column definition.
type column struct {
	name    string
	typ     colType
	notNull bool
	def     *defaultVal // nil: no DEFAULT
	pk      bool        // PRIMARY KEY (or KEY) in the definition
	unique  bool
}

func (c *column) sql() string {
	s := quote(c.name) + " " + c.typ.pg
	if c.notNull {
		s += " NOT NULL"
	}
	if c.def != nil && c.def.sql != "" {
		s += " DEFAULT " + c.def.sql
	}
	return s
}

// parseColumn reads a column definition. Column positions (FIRST, AFTER c)
// are dropped: PostgreSQL appends columns, and the sink names every column.
func parseColumn(el []mysqltok.Token) (*column, error) {
	if len(el) < 2 || !el[0].IsName() {
		return nil, unsupported("column definition %q", mysqltok.Spaced(el))
	}
	c := &column{name: el[0].Name()}
	if err := checkName(c.name); err != nil {
		return nil, err
	}
	ct, n, unsigned, err := parseType(el[1:])
	if err != nil {
		return nil, err
	}
	var defToks []mysqltok.Token
	skipParens := func(i int) int {
		if i+1 < len(el) && el[i+1].Is('(') {
			if e := mysqltok.Closing(el, i+1); e >= 0 {
				return e
			}
		}
		return i
	}
	for i := 1 + n; i < len(el); i++ {
		w := el[i].Word()
		switch {
		case w == "NOT" && i+1 < len(el) && el[i+1].Word() == "NULL":
			c.notNull = true
			i++
		case w == "NULL":
			c.notNull = false
		case w == "DEFAULT":
			end, err := defaultExtent(el, i+1)
			if err != nil {
				return nil, err
			}
			defToks = el[i+1 : end]
			i = end - 1
		case w == "AUTO_INCREMENT" || w == "AUTO_RANDOM":
			// The log carries the values.
			i = skipParens(i)
		case w == "UNSIGNED" || w == "ZEROFILL":
			unsigned = true
		case w == "SIGNED" || w == "BINARY" || w == "ASCII" || w == "UNICODE" || w == "BYTE" ||
			w == "VISIBLE" || w == "INVISIBLE" || w == "ENFORCED":
		case (w == "CHARACTER" && i+2 < len(el) && el[i+1].Word() == "SET") || w == "CHARSET" && i+1 < len(el):
			if w == "CHARACTER" {
				i++
			}
			i++
			if strings.EqualFold(el[i].Name(), "binary") {
				ct.binary = true
			}
		case w == "COLLATE" && i+1 < len(el):
			i++
			if strings.EqualFold(el[i].Name(), "binary") {
				ct.binary = true
			}
		case (w == "COMMENT" || w == "COLUMN_FORMAT" || w == "STORAGE") && i+1 < len(el):
			i++
		case w == "ON" && i+2 < len(el) && el[i+1].Word() == "UPDATE":
			// ON UPDATE CURRENT_TIMESTAMP: the log carries the values.
			i = skipParens(i + 2)
		case w == "PRIMARY" && i+1 < len(el) && el[i+1].Word() == "KEY":
			c.pk = true
			i++
		case w == "KEY":
			c.pk = true
		case w == "UNIQUE":
			c.unique = true
			if i+1 < len(el) && el[i+1].Word() == "KEY" {
				i++
			}
		case w == "CONSTRAINT" && i+1 < len(el):
			// CONSTRAINT [name] CHECK (…): checks are dropped (see the
			// package doc).
			if el[i+1].Word() != "CHECK" {
				i++
			}
		case w == "CHECK":
			i = skipParens(i)
		case w == "NOT" && i+1 < len(el) && el[i+1].Word() == "ENFORCED":
			i++
		case w == "REFERENCES":
			// MySQL parses and ignores a column's REFERENCES.
			i = len(el)
		case w == "FIRST":
		case w == "AFTER" && i+1 < len(el):
			i++
		case w == "GENERATED" || w == "AS":
			return nil, unsupported("generated column %s", c.name)
		case w == "SERIAL":
			return nil, unsupported("SERIAL DEFAULT VALUE")
		case w == "SRID":
			return nil, unsupported("SRID")
		default:
			return nil, unsupported("column %s: clause %q", c.name, mysqltok.Spaced(el[i:]))
		}
	}
	if err := ct.finish(unsigned); err != nil {
		return nil, err
	}
	c.typ = ct
	if c.pk {
		c.notNull = true
	}
	if defToks != nil {
		d, err := translateDefault(&c.typ, defToks)
		if err != nil {
			return nil, err
		}
		c.def = &d
	}
	return c, nil
}

// tableOptions accepts a CREATE TABLE's table options (all dropped) and
// refuses partitioning and CREATE … SELECT.
func tableOptions(toks []mysqltok.Token) error {
	depth := 0
	for _, t := range toks {
		switch {
		case t.Is('('):
			depth++
		case t.Is(')'):
			depth--
		case depth == 0:
			switch t.Word() {
			case "PARTITION", "PARTITIONS", "SUBPARTITION":
				return unsupported("partitioned table")
			case "SELECT", "AS", "IGNORE", "REPLACE", "TABLE", "WITH":
				return unsupported("CREATE TABLE … %s", t.Word())
			}
		}
	}
	return nil
}

func (r *rewriter) createTable(toks []mysqltok.Token) error {
	i := 2
	if mysqltok.Words(toks[i:], "IF", "NOT", "EXISTS") {
		i += 3
	}
	t, i, err := r.tableRef(toks, i)
	if err != nil {
		return err
	}
	if i < len(toks) && toks[i].Word() == "LIKE" {
		return r.createLike(t, toks[i+1:])
	}
	if i+1 < len(toks) && toks[i].Is('(') && toks[i+1].Word() == "LIKE" {
		end := mysqltok.Closing(toks, i)
		if end != len(toks)-1 {
			return unsupported("CREATE TABLE (LIKE …) form")
		}
		return r.createLike(t, toks[i+2:end])
	}
	if i >= len(toks) || !toks[i].Is('(') {
		return unsupported("CREATE TABLE without a column list (… SELECT)")
	}
	end := mysqltok.Closing(toks, i)
	if end < 0 {
		return unsupported("unbalanced parentheses")
	}
	if err := tableOptions(toks[end+1:]); err != nil {
		return err
	}
	var (
		defs    []string
		cols    []*column
		pk      *key
		keys    []*key
		fks     []*key
		usedIdx = map[string]bool{}
	)
	for _, el := range mysqltok.SplitTop(toks[i+1 : end]) {
		if len(el) == 0 {
			return unsupported("empty table element")
		}
		if !isKey(el) {
			c, err := parseColumn(el)
			if err != nil {
				return err
			}
			cols = append(cols, c)
			defs = append(defs, c.sql())
			if c.pk {
				if pk != nil {
					return unsupported("two primary keys")
				}
				pk = &key{kind: "PRIMARY", cols: []string{c.name}, parts: quote(c.name)}
			}
			continue
		}
		k, err := r.parseKey(el)
		if err != nil {
			return err
		}
		switch k.kind {
		case "PRIMARY":
			if pk != nil {
				return unsupported("two primary keys")
			}
			pk = k
		case "FOREIGN":
			fks = append(fks, k)
		case "UNIQUE", "INDEX":
			keys = append(keys, k)
			if k.name != "" {
				usedIdx[strings.ToLower(k.name)] = true
			}
		}
	}
	// A column's UNIQUE is an index named after the column.
	for _, c := range cols {
		if c.unique {
			keys = append(keys, &key{kind: "UNIQUE", cols: []string{c.name}, parts: quote(c.name)})
		}
	}
	name := func(k *key) {
		if k.name == "" {
			k.name = freeName(k.cols[0], usedIdx)
		}
		usedIdx[strings.ToLower(k.name)] = true
	}
	for _, k := range keys {
		name(k)
	}
	// TiDB names foreign keys without a name fk_1, fk_2…, and gives every
	// foreign key an index unless one starts with its columns.
	for n, k := range fks {
		if k.name == "" {
			k.name = "fk_" + strconv.Itoa(n+1)
		}
		covered := pk != nil && prefix(k.cols, pk.cols)
		for _, o := range keys {
			covered = covered || prefix(k.cols, o.cols)
		}
		if !covered && !usedIdx[strings.ToLower(k.name)] {
			keys = append(keys, &key{kind: "INDEX", name: k.name, cols: k.cols, parts: k.parts})
			usedIdx[strings.ToLower(k.name)] = true
		}
	}
	if pk != nil {
		defs = append(defs, "CONSTRAINT "+quote(objectName(t.name, primaryName))+" PRIMARY KEY ("+pk.parts+")")
	}
	r.emit("CREATE TABLE IF NOT EXISTS " + t.sql() + " (" + strings.Join(defs, ", ") + ")")
	if pk != nil {
		r.indexComment(t, primaryName)
	}
	for _, c := range cols {
		r.columnComment(t, c)
	}
	for _, k := range keys {
		if err := r.createKey(t, k); err != nil {
			return err
		}
	}
	for _, k := range fks {
		if err := r.addForeignKey(t, k); err != nil {
			return err
		}
	}
	return nil
}

// freeName is MySQL's name for an unnamed index: its first column, or that
// with _2, _3… when taken.
func freeName(col string, used map[string]bool) string {
	if !used[strings.ToLower(col)] && !strings.EqualFold(col, primaryName) {
		return col
	}
	for n := 2; ; n++ {
		s := col + "_" + strconv.Itoa(n)
		if !used[strings.ToLower(s)] {
			return s
		}
	}
}

// prefix reports whether cols are the first columns of index.
func prefix(cols, index []string) bool {
	if len(cols) > len(index) {
		return false
	}
	for i := range cols {
		if !strings.EqualFold(cols[i], index[i]) {
			return false
		}
	}
	return true
}

// createKey emits the statements of a named UNIQUE, INDEX or PRIMARY key.
func (r *rewriter) createKey(t qname, k *key) error {
	if k.kind == "PRIMARY" {
		k.name = primaryName
	}
	if err := checkName(k.name); err != nil {
		return err
	}
	switch k.kind {
	case "PRIMARY":
		pk := objectName(t.name, primaryName)
		r.emit(doBlock("IF NOT " + hasConstraint(t, pk) + " THEN ALTER TABLE " + t.sql() + " ADD CONSTRAINT " + quote(pk) +
			" PRIMARY KEY (" + k.parts + "); END IF;"))
		r.indexComment(t, primaryName)
		return nil
	case "UNIQUE", "INDEX":
		if strings.EqualFold(k.name, primaryName) {
			return unsupported("index named PRIMARY")
		}
		unique := ""
		if k.kind == "UNIQUE" {
			unique = "UNIQUE "
		}
		r.emit("CREATE " + unique + "INDEX IF NOT EXISTS " + quote(objectName(t.name, k.name)) + " ON " + t.sql() + " (" + k.parts + ")")
		r.indexComment(t, k.name)
		r.noteIndex(t, k.name, true)
		return nil
	case "CHECK":
		return nil // see the package doc
	}
	return unsupported("%s key", k.kind)
}

// addForeignKey adds foreign key k to t, NOT VALID: the existing rows are
// not checked, as MySQL does not with foreign_key_checks off (the apply's
// default); the log holds the rows the upstream accepted.
func (r *rewriter) addForeignKey(t qname, k *key) error {
	if err := checkName(k.name); err != nil {
		return err
	}
	fk := fkName(k.name)
	r.emit(doBlock("IF NOT " + hasConstraint(t, fk) + " THEN ALTER TABLE " + t.sql() + " ADD CONSTRAINT " + quote(fk) +
		" FOREIGN KEY (" + k.parts + ") " + k.ref + " NOT VALID; END IF;"))
	return nil
}

// fkIndex gives the foreign key k of an ALTER TABLE an index named after it,
// unless an index of t starts with its columns, as TiDB does. (CREATE TABLE
// sees its indexes and decides itself.)
func (r *rewriter) fkIndex(t qname, k *key) error {
	if err := checkName(k.name); err != nil {
		return err
	}
	cols := make([]string, len(k.cols))
	for i, c := range k.cols {
		cols[i] = literal(c)
	}
	r.emit(doBlock("IF NOT EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = " + regclass(t.sql()) +
		" AND ARRAY(SELECT a.attname::text FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n) JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum" +
		" WHERE k.n <= " + strconv.Itoa(len(cols)) + " ORDER BY k.n) = ARRAY[" + strings.Join(cols, ", ") + "]::text[]) THEN CREATE INDEX IF NOT EXISTS " +
		quote(objectName(t.name, k.name)) + " ON " + t.sql() + " (" + k.parts + "); END IF;"))
	r.indexComment(t, k.name)
	r.noteIndex(t, k.name, true)
	return nil
}

// createIndex: CREATE [UNIQUE] INDEX [IF NOT EXISTS] i [USING t] ON t (parts) [options].
func (r *rewriter) createIndex(toks []mysqltok.Token) error {
	i := 1
	kind := "INDEX"
	if toks[i].Word() == "UNIQUE" {
		kind = "UNIQUE"
		i++
	}
	i++ // INDEX
	if mysqltok.Words(toks[i:], "IF", "NOT", "EXISTS") {
		i += 3
	}
	if i >= len(toks) || !toks[i].IsName() {
		return unsupported("CREATE INDEX form")
	}
	name := toks[i].Name()
	i++
	if i+1 < len(toks) && toks[i].Word() == "USING" {
		i += 2
	}
	if i >= len(toks) || toks[i].Word() != "ON" {
		return unsupported("CREATE INDEX form")
	}
	t, i, err := r.tableRef(toks, i+1)
	if err != nil {
		return err
	}
	if i >= len(toks) || !toks[i].Is('(') {
		return unsupported("CREATE INDEX form")
	}
	end := mysqltok.Closing(toks, i)
	if end < 0 {
		return unsupported("unbalanced parentheses")
	}
	cols, parts, err := keyParts(toks[i+1 : end])
	if err != nil {
		return err
	}
	if err := keyOptions(toks[end+1:]); err != nil {
		return err
	}
	return r.createKey(t, &key{kind: kind, name: name, cols: cols, parts: parts})
}
