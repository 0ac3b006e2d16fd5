package pgddl

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/redokit/redokit/apply/internal/mysqltok"
)

// This file holds the forms that read the downstream's catalog: renames
// (which must carry the index names along), CREATE TABLE … LIKE (which
// copies indexes under the new table's names), MODIFY/CHANGE and SET
// DEFAULT (which need the column's current type).

// tableState is a table as the catalog, and the renames of the DDL so far,
// leave it.
type tableState struct {
	exists  bool
	kind    string // pg_class.relkind: r, p, v, m, f
	indexes []pgIndex
}

type pgIndex struct {
	pg    string // the PostgreSQL name
	mysql string // the MySQL name; "" for an index redokit did not name
}

// mysqlIndexName returns the MySQL name of the PostgreSQL index pg of table,
// with comment its comment: from the comment of a hashed name, else from
// the "table." prefix; "" when the index was not named by this package.
func mysqlIndexName(table, pg, comment string) string {
	if m, ok := strings.CutPrefix(comment, indexCommentPrefix); ok && objectName(table, m) == pg {
		return m
	}
	if m, ok := strings.CutPrefix(pg, table+"."); ok && objectName(table, m) == pg {
		return m
	}
	return ""
}

func (r *rewriter) state(t qname) (*tableState, error) {
	if s, ok := r.tables[t]; ok {
		return s, nil
	}
	rows, err := r.q.QueryContext(r.ctx, `SELECT c.relkind::text, coalesce(i.relname::text, ''), coalesce(obj_description(i.oid, 'pg_class'), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index x ON x.indrelid = c.oid LEFT JOIN pg_class i ON i.oid = x.indexrelid
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY i.relname`, t.schema, t.name)
	if err != nil {
		return nil, fmt.Errorf("pgddl: reading the indexes of %s: %w", t, err)
	}
	defer rows.Close()
	s := &tableState{}
	for rows.Next() {
		var kind, idx, comment string
		if err := rows.Scan(&kind, &idx, &comment); err != nil {
			return nil, fmt.Errorf("pgddl: reading the indexes of %s: %w", t, err)
		}
		s.exists, s.kind = true, kind
		if idx != "" {
			s.indexes = append(s.indexes, pgIndex{pg: idx, mysql: mysqlIndexName(t.name, idx, comment)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgddl: reading the indexes of %s: %w", t, err)
	}
	r.tables[t] = s
	return s, nil
}

// indexNames returns the MySQL index names of t (lower case), for naming an
// unnamed index as MySQL does.
func (r *rewriter) indexNames(t qname) (map[string]bool, error) {
	s, err := r.state(t)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, ix := range s.indexes {
		if ix.mysql != "" {
			used[strings.ToLower(ix.mysql)] = true
		}
	}
	return used, nil
}

func tmpName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "redokit~" + hex.EncodeToString(sum[:8])
}

// rename renames table (or view) from to to, and the indexes along: their
// names start with the table's. A replay (from gone, to there) does
// nothing; neither there is an error, as in MySQL.
func (r *rewriter) rename(from, to qname) error {
	src, err := r.state(from)
	if err != nil {
		return err
	}
	dst, err := r.state(to)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	switch {
	case !src.exists && dst.exists:
		return nil // already renamed
	case !src.exists:
		return fmt.Errorf("pgddl: RENAME of table %s to %s: neither exists downstream", from, to)
	case dst.exists:
		return fmt.Errorf("pgddl: RENAME of table %s to %s: both exist downstream", from, to)
	}
	alter := "ALTER TABLE "
	if src.kind == "v" || src.kind == "m" {
		alter = "ALTER VIEW "
		if src.kind == "m" {
			alter = "ALTER MATERIALIZED VIEW "
		}
	}
	moved := &tableState{exists: true, kind: src.kind}
	type move struct{ old, tmp, new, mysql string }
	var moves []move
	for _, ix := range src.indexes {
		m := move{old: ix.pg, new: ix.pg, mysql: ix.mysql}
		if ix.mysql != "" {
			m.new = objectName(to.name, ix.mysql)
		}
		moves = append(moves, m)
		moved.indexes = append(moved.indexes, pgIndex{pg: m.new, mysql: ix.mysql})
	}
	if from.schema == to.schema {
		r.emit(alter + from.sql() + " RENAME TO " + quote(to.name))
		for _, m := range moves {
			if m.new != m.old {
				r.emit("ALTER INDEX " + to.in(m.old) + " RENAME TO " + quote(m.new))
			}
		}
	} else {
		// Across schemas, through names no other table has, so that no
		// step collides with a table or index of either schema.
		tmp := tmpName(from.String() + "\x00" + to.String())
		r.emit(alter + from.sql() + " RENAME TO " + quote(tmp))
		for i := range moves {
			m := &moves[i]
			if m.new != m.old {
				m.tmp = tmpName(from.String() + "\x00" + to.String() + "\x00" + m.old)
				r.emit("ALTER INDEX " + from.in(m.old) + " RENAME TO " + quote(m.tmp))
			}
		}
		r.emit(alter + from.in(tmp) + " SET SCHEMA " + quote(to.schema))
		if tmp != to.name {
			r.emit(alter + to.in(tmp) + " RENAME TO " + quote(to.name))
		}
		for _, m := range moves {
			if m.tmp != "" {
				r.emit("ALTER INDEX " + to.in(m.tmp) + " RENAME TO " + quote(m.new))
			}
		}
	}
	for _, m := range moves {
		if m.mysql != "" && m.new != m.old {
			r.indexComment(to, m.mysql)
		}
	}
	r.tables[to] = moved
	r.tables[from] = &tableState{}
	return nil
}

// createLike: CREATE TABLE t LIKE u. PostgreSQL's LIKE copies the columns,
// their NOT NULL, defaults and comments; the indexes are created here under
// t's names, as MySQL's LIKE copies them.
func (r *rewriter) createLike(t qname, toks []mysqltok.Token) error {
	if err := r.needCatalog("CREATE TABLE … LIKE"); err != nil {
		return err
	}
	src, end, err := r.tableRef(toks, 0)
	if err != nil {
		return err
	}
	if end != len(toks) {
		return unsupported("CREATE TABLE … LIKE form")
	}
	rows, err := r.q.QueryContext(r.ctx, `SELECT i.relname::text, x.indisunique, x.indisprimary, coalesce(obj_description(i.oid, 'pg_class'), ''),
  array_to_string(ARRAY(SELECT pg_get_indexdef(x.indexrelid, k, false) ||
    CASE WHEN x.indoption[k - 1] & 1 = 1 THEN ' DESC' ELSE '' END FROM generate_series(1, x.indnkeyatts) k ORDER BY k), E'\x1f'),
  x.indexprs IS NOT NULL OR x.indpred IS NOT NULL
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 ORDER BY i.relname`, src.schema, src.name)
	if err != nil {
		return fmt.Errorf("pgddl: reading the indexes of %s: %w", src, err)
	}
	defer rows.Close()
	var keys []*key
	for rows.Next() {
		var name, comment, parts string
		var unique, primary, expr bool
		if err := rows.Scan(&name, &unique, &primary, &comment, &parts, &expr); err != nil {
			return fmt.Errorf("pgddl: reading the indexes of %s: %w", src, err)
		}
		m := mysqlIndexName(src.name, name, comment)
		if m == "" || expr {
			return fmt.Errorf("pgddl: CREATE TABLE %s LIKE %s: index %s of %s was not made from a MySQL one", t, src, name, src)
		}
		k := &key{kind: "INDEX", name: m, parts: strings.Join(strings.Split(parts, "\x1f"), ", ")}
		switch {
		case primary:
			k.kind = "PRIMARY"
		case unique:
			k.kind = "UNIQUE"
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgddl: reading the indexes of %s: %w", src, err)
	}
	r.emit("CREATE TABLE IF NOT EXISTS " + t.sql() + " (LIKE " + src.sql() + " INCLUDING DEFAULTS INCLUDING COMMENTS)")
	for _, k := range keys {
		if err := r.createKey(t, k); err != nil {
			return err
		}
	}
	return nil
}

// columnInfo is a column as the catalog has it.
type columnInfo struct {
	exists  bool
	pgType  string // format_type
	comment string
	inPK    bool
}

func (r *rewriter) column(t qname, c string) (columnInfo, error) {
	var ci columnInfo
	rows, err := r.q.QueryContext(r.ctx, `SELECT format_type(a.atttypid, a.atttypmod), coalesce(col_description(a.attrelid, a.attnum), ''),
  EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conrelid = a.attrelid AND k.contype = 'p' AND a.attnum = ANY (k.conkey))
FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped`, t.sql(), c)
	if err != nil {
		return ci, fmt.Errorf("pgddl: reading column %s of %s: %w", c, t, err)
	}
	defer rows.Close()
	for rows.Next() {
		ci.exists = true
		if err := rows.Scan(&ci.pgType, &ci.comment, &ci.inPK); err != nil {
			return ci, fmt.Errorf("pgddl: reading column %s of %s: %w", c, t, err)
		}
	}
	if err := rows.Err(); err != nil {
		return ci, fmt.Errorf("pgddl: reading column %s of %s: %w", c, t, err)
	}
	return ci, nil
}

// typeOf returns the colType of a column from the catalog: the MySQL type of
// its comment, or else the class of its PostgreSQL type.
func typeOf(ci columnInfo) (colType, error) {
	if m, ok := strings.CutPrefix(ci.comment, columnCommentPrefix); ok {
		toks, err := mysqltok.Tokenize(m)
		if err == nil {
			toks = mysqltok.Solid(toks)
			ct, n, unsigned, err := parseType(toks)
			if err == nil && n == len(toks) {
				if err := ct.finish(unsigned); err == nil {
					return ct, nil
				}
			}
		}
		return colType{}, fmt.Errorf("pgddl: column comment %q is not a MySQL type", ci.comment)
	}
	ct := colType{pg: ci.pgType, mysql: ci.pgType}
	p := ci.pgType
	switch {
	case p == "smallint" || p == "integer" || p == "bigint":
		ct.class = clInt
	case strings.HasPrefix(p, "numeric"):
		ct.class = clNumeric
	case p == "real" || p == "double precision":
		ct.class = clFloat
	case strings.HasPrefix(p, "character varying") || p == "text":
		ct.class = clString
	case p == "bytea":
		ct.class = clBytes
	case p == "date":
		ct.class = clDate
	case strings.HasPrefix(p, "timestamp") && strings.HasSuffix(p, "without time zone"):
		ct.class = clDatetime
	case strings.HasPrefix(p, "timestamp") && strings.HasSuffix(p, "with time zone"):
		ct.class = clTimestamp
	case p == "interval":
		ct.class = clTime
	case p == "json":
		ct.class = clJSON
	}
	return ct, nil
}

// conversion returns the USING expression that converts column c from old
// to new as MySQL does ("" when PostgreSQL's own assignment cast does), or
// an error when the two would differ.
func conversion(c string, old, new *colType) (string, error) {
	o, n := old.class, new.class
	refuse := func(why string) (string, error) {
		return "", unsupported("MODIFY of column %s from %s to %s: %s", c, old.mysql, new.mysql, why)
	}
	number := func(k class) bool { return k == clInt || k == clNumeric }
	switch {
	case o == 0:
		return refuse("the column's type was not made by redokit")
	case o == clEnum || o == clSet || n == clEnum || n == clSet:
		if o != n || !slices.Equal(old.members, new.members[:min(len(old.members), len(new.members))]) ||
			len(new.members) < len(old.members) {
			return refuse("the stored member numbers would change meaning (only appending members is translated)")
		}
		return "", nil
	case n == clYear:
		if o == clYear {
			return "", nil
		}
		return refuse("MySQL reads one- and two-digit years as 19xx and 20xx")
	case o == clYear:
		if number(n) || n == clFloat {
			return "", nil
		}
	case o == clBit:
		if number(n) || n == clBit {
			return "", nil
		}
	case n == clBit:
		if o == clInt {
			return "", nil
		}
	case number(o):
		if number(n) || n == clFloat || n == clString {
			return "", nil
		}
	case o == clFloat:
		if n == clFloat {
			return "", nil
		}
	case o == clString:
		switch {
		case n == clString:
			return "", nil
		case n == clBytes:
			return "convert_to(" + quote(c) + ", 'UTF8')", nil
		case number(n):
			return quote(c) + "::" + new.pg, nil
		}
	case o == clBytes:
		switch n {
		case clBytes:
			return "", nil
		case clString:
			return "convert_from(" + quote(c) + ", 'UTF8')", nil
		}
	case o == clDate:
		if n == clDate || n == clDatetime {
			return "", nil
		}
	case o == n:
		return "", nil
	}
	return refuse("the conversion is not translated (PostgreSQL's would differ or is not checked)")
}

// modifyColumn: MODIFY [COLUMN] def and CHANGE [COLUMN] old def. MySQL
// replaces the whole definition: type, NULL, DEFAULT.
func (r *rewriter) modifyColumn(t qname, old string, def []mysqltok.Token) error {
	c, err := parseColumn(def)
	if err != nil {
		return err
	}
	if c.pk || c.unique {
		return unsupported("MODIFY or CHANGE of column %s with a key", c.name)
	}
	alter := "ALTER TABLE " + t.sql() + " "
	ci, err := r.column(t, c.name)
	if err != nil {
		return err
	}
	if old != "" && old != c.name {
		if err := checkName(old); err != nil {
			return err
		}
		oi, err := r.column(t, old)
		if err != nil {
			return err
		}
		if oi.exists || !ci.exists {
			// Not a replay of the rename: rename.
			ci = oi
			if err := r.renameColumn(t, old, c.name); err != nil {
				return err
			}
		}
	}
	if !ci.exists {
		return fmt.Errorf("pgddl: column %s of table %s does not exist downstream", firstNonEmpty(old, c.name), t)
	}
	oldType, err := typeOf(ci)
	if err != nil {
		return err
	}
	using, err := conversion(c.name, &oldType, &c.typ)
	if err != nil {
		return err
	}
	col := alter + "ALTER COLUMN " + quote(c.name) + " "
	r.emit(col + "DROP DEFAULT")
	if using != "" {
		r.emit(col + "TYPE " + c.typ.pg + " USING " + using)
	} else {
		r.emit(col + "TYPE " + c.typ.pg)
	}
	// A default PostgreSQL cannot give as MySQL does is left out: the
	// log's rows carry every column's value.
	if c.def != nil && c.def.sql != "" {
		r.emit(col + "SET DEFAULT " + c.def.sql)
	}
	switch {
	case c.notNull:
		r.emit(col + "SET NOT NULL")
	case !ci.inPK:
		// MySQL keeps a primary key's columns NOT NULL whatever MODIFY says.
		r.emit(col + "DROP NOT NULL")
	}
	switch {
	case c.typ.marker():
		r.columnComment(t, c)
	case ci.comment != "":
		r.emit("COMMENT ON COLUMN " + t.sql() + "." + quote(c.name) + " IS NULL")
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// setDefault: ALTER [COLUMN] c SET DEFAULT v. A default PostgreSQL cannot
// give as MySQL does drops the column's default instead: only rows inserted
// without the column would take it, and the log's rows carry every column.
func (r *rewriter) setDefault(t qname, c string, v []mysqltok.Token) error {
	if err := r.needCatalog("ALTER COLUMN … SET DEFAULT"); err != nil {
		return err
	}
	end, err := defaultExtent(v, 0)
	if err != nil {
		return err
	}
	if end != len(v) {
		return unsupported("SET DEFAULT %q", mysqltok.Spaced(v))
	}
	ci, err := r.column(t, c)
	if err != nil {
		return err
	}
	if !ci.exists {
		return fmt.Errorf("pgddl: column %s of table %s does not exist downstream", c, t)
	}
	ct, err := typeOf(ci)
	if err != nil {
		return err
	}
	if ct.class == 0 {
		return unsupported("SET DEFAULT of column %s, of type %s not made by redokit", c, ci.pgType)
	}
	d, err := translateDefault(&ct, v)
	if err != nil {
		return err
	}
	col := "ALTER TABLE " + t.sql() + " ALTER COLUMN " + quote(c) + " "
	if d.sql == "" {
		r.emit(col + "DROP DEFAULT")
	} else {
		r.emit(col + "SET DEFAULT " + d.sql)
	}
	return nil
}
