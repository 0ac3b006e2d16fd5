package main

import (
	"fmt"
	"strings"
	"unicode"
)

// translateDDL turns one PostgreSQL DDL statement of the few forms the
// capture carries into MySQL text, the dialect the log's DDLs are in (the
// sinks' translators read MySQL DDL: apply/internal/sqliteddl,
// apply/internal/pgddl):
//
//	CREATE TABLE [IF NOT EXISTS] [s.]t (col type [NOT NULL|NULL] [PRIMARY KEY], …, [PRIMARY KEY (a, …)])
//	ALTER TABLE [IF EXISTS] [s.]t ADD [COLUMN] [IF NOT EXISTS] col type [NOT NULL|NULL]
//	DROP TABLE [IF EXISTS] [s.]t
//
// with the types of mapColumn (smallint/int2, integer/int/int4, bigint/int8,
// numeric(p,s)/decimal(p,s), text, varchar(n)/character varying(n), bytea,
// boolean/bool, real/float4, double precision/float8, date,
// timestamp[(p)] [without time zone], timestamptz/timestamp[(p)] with time
// zone, json, jsonb), and smallserial/serial/bigserial (serial2/4/8) and
// GENERATED {ALWAYS|BY DEFAULT} AS IDENTITY [(…)] on an integer column: the
// integer type, NOT NULL, and AUTO_INCREMENT when the column is the primary
// key's first (MySQL allows it on a key only; the sinks drop it, as the log
// carries every value the sequence gave). Comments are left out. Anything else — a DEFAULT, a constraint other than the
// primary key, an unconstrained numeric (MySQL's DECIMAL would round it), a
// serial or identity column added to a table (the values it gives the rows
// already there are not in the log) — is an error quoting the statement: a
// DDL the downstream would run differently must stop the capture, not be
// skipped silently (the operator may skip it by name: -skip-ddl).
func translateDDL(query string) (mysql string, kind string, table string, err error) {
	var toks []string
	clean, err := mask(query, false) // comments out, literals kept (and refused)
	if err == nil {
		toks, err = tokenize(clean)
	}
	if err != nil {
		return "", "", "", fmt.Errorf("DDL %q: %w", trunc(query), err)
	}
	p := &parser{toks: toks}
	fail := func(format string, a ...any) (string, string, string, error) {
		return "", "", "", fmt.Errorf("DDL %q: %s", trunc(query), fmt.Sprintf(format, a...))
	}
	var b strings.Builder
	switch {
	case p.accept("create", "table"):
		kind = "create"
		b.WriteString("CREATE TABLE ")
		if p.accept("if", "not", "exists") {
			b.WriteString("IF NOT EXISTS ")
		}
		if table, err = p.tableName(); err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(&b, "%s (", quote(table))
		if !p.accept("(") {
			return fail("expected ( after the table name")
		}
		var cols, pk []string
		auto := map[string]int{} // serial and identity columns: their index in cols
		for {
			if p.accept("primary", "key") {
				if !p.accept("(") {
					return fail("expected ( after PRIMARY KEY")
				}
				for {
					n, err := p.ident()
					if err != nil {
						return fail("%v", err)
					}
					pk = append(pk, quote(n))
					if p.accept(")") {
						break
					}
					if !p.accept(",") {
						return fail("expected , or ) in PRIMARY KEY")
					}
				}
			} else {
				def, isPK, isAuto, err := p.column()
				if err != nil {
					return fail("%v", err)
				}
				if isAuto {
					auto[strings.Fields(def)[0]] = len(cols)
				}
				cols = append(cols, def)
				if isPK {
					pk = append(pk, strings.Fields(def)[0])
				}
			}
			if p.accept(")") {
				break
			}
			if !p.accept(",") {
				return fail("expected , or ) after %q", p.peek())
			}
		}
		// MySQL allows one AUTO_INCREMENT column, and only as the first
		// column of a key: the primary key's first column gets it. The
		// attribute is the downstream's business only (the log carries every
		// value the upstream's sequence gave); other serial and identity
		// columns are plain integers there.
		if len(pk) > 0 {
			if i, ok := auto[pk[0]]; ok {
				cols[i] += " AUTO_INCREMENT"
			}
		}
		b.WriteString(strings.Join(cols, ", "))
		if len(pk) > 0 {
			fmt.Fprintf(&b, ", PRIMARY KEY (%s)", strings.Join(pk, ", "))
		}
		b.WriteString(")")
	case p.accept("alter", "table"):
		kind = "alter"
		p.accept("if", "exists")
		p.accept("only")
		if table, err = p.tableName(); err != nil {
			return fail("%v", err)
		}
		if !p.accept("add") {
			return fail("only ALTER TABLE … ADD COLUMN is translated")
		}
		p.accept("column")
		// MySQL has no ADD COLUMN IF NOT EXISTS; the sinks count a
		// duplicate column as applied, which is what it means.
		p.accept("if", "not", "exists")
		def, isPK, isAuto, err := p.column()
		if err != nil {
			return fail("%v", err)
		}
		if isPK {
			return fail("a new primary-key column is not translated")
		}
		if isAuto {
			// The upstream fills the existing rows from the sequence, and
			// the log has no row events for that.
			return fail("a new serial or identity column is not translated: the values it gives the existing rows are not in the log")
		}
		fmt.Fprintf(&b, "ALTER TABLE %s ADD COLUMN %s", quote(table), def)
	case p.accept("drop", "table"):
		kind = "drop"
		b.WriteString("DROP TABLE ")
		if p.accept("if", "exists") {
			b.WriteString("IF EXISTS ")
		}
		if table, err = p.tableName(); err != nil {
			return fail("%v", err)
		}
		if p.peek() == "," {
			return fail("a DROP of several tables is not translated: drop one table per statement")
		}
		p.accept("restrict")
		b.WriteString(quote(table))
	default:
		return fail("only CREATE TABLE, ALTER TABLE … ADD COLUMN and DROP TABLE are translated to MySQL")
	}
	p.accept(";")
	if !p.done() {
		return fail("unexpected %q (one statement, in the forms the capture translates)", p.peek())
	}
	return b.String(), kind, table, nil
}

// mysqlType maps a PostgreSQL type name, as written in DDL, to MySQL's.
// serial types map to their integer type; serial reports them.
func (p *parser) mysqlType() (typ string, serial bool, err error) {
	t := p.next()
	switch t {
	case "smallserial", "serial2":
		return "SMALLINT", true, nil
	case "serial", "serial4":
		return "INT", true, nil
	case "bigserial", "serial8":
		return "BIGINT", true, nil
	}
	typ, err = p.plainType(t)
	return typ, false, err
}

// plainType maps the type name t (read) and its arguments (next) to MySQL's.
func (p *parser) plainType(t string) (string, error) {
	args := func() ([]string, error) {
		if !p.accept("(") {
			return nil, nil
		}
		var a []string
		for {
			n := p.next()
			if n == "" || !isDigits(n) {
				return nil, fmt.Errorf("type argument %q is not a number", n)
			}
			a = append(a, n)
			if p.accept(")") {
				return a, nil
			}
			if !p.accept(",") {
				return nil, fmt.Errorf("expected , or ) in a type's arguments")
			}
		}
	}
	switch t {
	case "smallint", "int2":
		return "SMALLINT", nil
	case "integer", "int", "int4":
		return "INT", nil
	case "bigint", "int8":
		return "BIGINT", nil
	case "text":
		return "LONGTEXT", nil
	case "bytea":
		return "LONGBLOB", nil
	case "boolean", "bool":
		return "TINYINT(1)", nil
	case "real", "float4":
		return "FLOAT", nil
	case "float8":
		return "DOUBLE", nil
	case "double":
		if !p.accept("precision") {
			return "", fmt.Errorf("expected DOUBLE PRECISION")
		}
		return "DOUBLE", nil
	case "date":
		return "DATE", nil
	case "json", "jsonb":
		return "JSON", nil
	case "numeric", "decimal":
		a, err := args()
		if err != nil {
			return "", err
		}
		switch len(a) {
		case 1:
			return fmt.Sprintf("DECIMAL(%s,0)", a[0]), nil
		case 2:
			return fmt.Sprintf("DECIMAL(%s,%s)", a[0], a[1]), nil
		}
		return "", fmt.Errorf("an unconstrained %s has no exact MySQL DECIMAL: give its precision and scale", t)
	case "varchar", "character":
		if t == "character" && !p.accept("varying") {
			return "", fmt.Errorf("CHARACTER (blank-padded) is not translated")
		}
		a, err := args()
		if err != nil {
			return "", err
		}
		if len(a) != 1 {
			return "", fmt.Errorf("a VARCHAR needs its length")
		}
		return fmt.Sprintf("VARCHAR(%s)", a[0]), nil
	case "timestamp", "timestamptz":
		a, err := args()
		if err != nil {
			return "", err
		}
		fsp := "6"
		if len(a) == 1 {
			fsp = a[0]
		}
		tz := t == "timestamptz"
		if p.accept("with", "time", "zone") {
			tz = true
		} else {
			p.accept("without", "time", "zone")
		}
		if tz {
			return fmt.Sprintf("TIMESTAMP(%s)", fsp), nil
		}
		return fmt.Sprintf("DATETIME(%s)", fsp), nil
	}
	return "", fmt.Errorf("type %q is not one the capture translates", t)
}

// column parses "name type [NOT NULL|NULL] [PRIMARY KEY]
// [GENERATED {ALWAYS|BY DEFAULT} AS IDENTITY [(options)]]" (constraints in
// any order). auto reports a serial or identity column: an integer whose
// values the upstream's sequence gives, and the log carries.
func (p *parser) column() (def string, pk, auto bool, err error) {
	name, err := p.ident()
	if err != nil {
		return "", false, false, err
	}
	typ, auto, err := p.mysqlType()
	if err != nil {
		return "", false, false, fmt.Errorf("column %s: %w", name, err)
	}
	notNull := auto // serial implies NOT NULL
	for {
		switch {
		case p.accept("not", "null"):
			notNull = true
		case p.accept("null"):
			if auto {
				return "", false, false, fmt.Errorf("column %s: NULL on a serial or identity column", name)
			}
		case p.accept("primary", "key"):
			pk, notNull = true, true
		case p.accept("generated", "always", "as", "identity") || p.accept("generated", "by", "default", "as", "identity"):
			if typ != "SMALLINT" && typ != "INT" && typ != "BIGINT" {
				return "", false, false, fmt.Errorf("column %s: identity on %s", name, typ)
			}
			if auto {
				return "", false, false, fmt.Errorf("column %s: identity on a serial column", name)
			}
			auto, notNull = true, true
			// Sequence options (START WITH 10 INCREMENT BY 2 …): the log
			// carries the values they give, so they are read and left.
			if p.accept("(") {
				for !p.accept(")") {
					if p.done() {
						return "", false, false, fmt.Errorf("column %s: unterminated identity options", name)
					}
					p.next()
				}
			}
		default:
			if s := p.peek(); s != "," && s != ")" && s != ";" && s != "" {
				return "", false, false, fmt.Errorf("column %s: %q is not translated (only NOT NULL, NULL, PRIMARY KEY and GENERATED … AS IDENTITY)", name, s)
			}
			def = quote(name) + " " + typ
			if notNull {
				def += " NOT NULL"
			}
			return def, pk, auto, nil
		}
	}
}

type parser struct {
	toks []string
	i    int
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *parser) next() string {
	s := p.peek()
	if s != "" {
		p.i++
	}
	return s
}

func (p *parser) done() bool { return p.i >= len(p.toks) }

// accept consumes the keywords ws if they come next, all of them.
func (p *parser) accept(ws ...string) bool {
	if p.i+len(ws) > len(p.toks) {
		return false
	}
	for j, w := range ws {
		if p.toks[p.i+j] != w {
			return false
		}
	}
	p.i += len(ws)
	return true
}

// ident returns an identifier: quoted ones come with a leading '"'.
func (p *parser) ident() (string, error) {
	s := p.next()
	if s == "" {
		return "", fmt.Errorf("expected a name, found the end")
	}
	if s[0] == '"' {
		return s[1:], nil
	}
	if !isIdent(s) {
		return "", fmt.Errorf("expected a name, found %q", s)
	}
	return s, nil
}

// tableName reads [schema.]table and returns the table: the log names the
// schema in the event, and MySQL text qualifies no table.
func (p *parser) tableName() (string, error) {
	n, err := p.ident()
	if err != nil {
		return "", err
	}
	if p.accept(".") {
		return p.ident()
	}
	return n, nil
}

// tokenize splits SQL (its comments masked out) into lower-cased words,
// numbers, punctuation and quoted identifiers (kept with their leading '"',
// case kept). String literals are refused: no translated form has one.
func tokenize(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quoted name")
			}
			toks = append(toks, `"`+s[i+1:i+1+j])
			i += j + 2
		case strings.ContainsRune("(),.;", c):
			toks = append(toks, string(c))
			i++
		case c == '_' || c < 0x80 && (unicode.IsLetter(c) || unicode.IsDigit(c)):
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '$' || s[j] < 0x80 && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])))) {
				j++
			}
			toks = append(toks, strings.ToLower(s[i:j]))
			i = j
		default:
			return nil, fmt.Errorf("%q at offset %d is not translated (no literals or operators)", string(c), i)
		}
	}
	return toks, nil
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func isIdent(s string) bool {
	return s != "" && (s[0] == '_' || s[0] >= 'a' && s[0] <= 'z')
}

// quote writes a MySQL identifier.
func quote(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
