package pgddl

import (
	"fmt"
	"strings"

	"github.com/redokit/redokit/apply/internal/mysqltok"
)

// alterTable: ALTER TABLE t spec[, spec…], one or more PostgreSQL statements
// per spec, in order.
func (r *rewriter) alterTable(toks []mysqltok.Token, i int) error {
	t, i, err := r.tableRef(toks, i)
	if err != nil {
		return err
	}
	specs := mysqltok.SplitTop(toks[i:])
	for _, spec := range specs {
		if len(spec) == 0 {
			return unsupported("ALTER TABLE with an empty clause")
		}
		if spec[0].Word() == "RENAME" && (len(spec) == 1 || spec[1].Word() != "COLUMN" && spec[1].Word() != "INDEX" && spec[1].Word() != "KEY") {
			if len(specs) != 1 {
				return unsupported("ALTER TABLE … RENAME with other clauses")
			}
			if err := r.needCatalog("ALTER TABLE … RENAME"); err != nil {
				return err
			}
			j := 1
			if j < len(spec) && (spec[j].Word() == "TO" || spec[j].Word() == "AS") {
				j++
			}
			to, end, err := r.tableRef(spec, j)
			if err != nil {
				return err
			}
			if end != len(spec) {
				return unsupported("ALTER TABLE … RENAME form")
			}
			return r.rename(t, to)
		}
		if err := r.alterSpec(t, spec); err != nil {
			return err
		}
	}
	return nil
}

func (r *rewriter) alterSpec(t qname, spec []mysqltok.Token) error {
	w := spec[0].Word()
	rest := spec[1:]
	alter := "ALTER TABLE " + t.sql() + " "
	switch {
	case w == "ADD" && len(rest) > 0 && (rest[0].Word() == "PARTITION"):
		return unsupported("ADD PARTITION")
	case w == "ADD" && len(rest) > 0 && isKey(rest):
		k, err := r.parseKey(rest)
		if err != nil {
			return err
		}
		switch k.kind {
		case "FOREIGN":
			if k.name == "" {
				return unsupported("ADD FOREIGN KEY without a name (TiDB's generated name depends on the table's history)")
			}
			if err := r.fkIndex(t, k); err != nil {
				return err
			}
			return r.addForeignKey(t, k)
		case "UNIQUE", "INDEX":
			if k.name == "" {
				if err := r.needCatalog("ADD INDEX without a name"); err != nil {
					return err
				}
				used, err := r.indexNames(t)
				if err != nil {
					return err
				}
				k.name = freeName(k.cols[0], used)
			}
		}
		return r.createKey(t, k)
	case w == "ADD":
		if len(rest) > 0 && rest[0].Word() == "COLUMN" {
			rest = rest[1:]
		}
		if len(rest) > 0 && rest[0].Is('(') {
			end := mysqltok.Closing(rest, 0)
			if end != len(rest)-1 {
				return unsupported("ADD COLUMN (…) form")
			}
			for _, def := range mysqltok.SplitTop(rest[1:end]) {
				if err := r.addColumn(t, def); err != nil {
					return err
				}
			}
			return nil
		}
		if mysqltok.Words(rest, "IF", "NOT", "EXISTS") {
			rest = rest[3:]
		}
		return r.addColumn(t, rest)
	case w == "DROP" && len(rest) > 0 && (rest[0].Word() == "INDEX" || rest[0].Word() == "KEY"):
		rest = rest[1:]
		ifExists := mysqltok.Words(rest, "IF", "EXISTS")
		if ifExists {
			rest = rest[2:]
		}
		if len(rest) != 1 || !rest[0].IsName() {
			return unsupported("DROP INDEX form")
		}
		return r.dropIndex(t, rest[0].Name(), ifExists)
	case w == "DROP" && mysqltok.Words(rest, "PRIMARY", "KEY") && len(rest) == 2:
		return r.dropPrimary(t, false)
	case w == "DROP" && mysqltok.Words(rest, "FOREIGN", "KEY"):
		rest = rest[2:]
		ifExists := mysqltok.Words(rest, "IF", "EXISTS")
		if ifExists {
			rest = rest[2:]
		}
		if len(rest) != 1 || !rest[0].IsName() {
			return unsupported("DROP FOREIGN KEY form")
		}
		return r.dropForeignKey(t, rest[0].Name(), ifExists)
	case w == "DROP" && len(rest) == 2 && rest[0].Word() == "CHECK":
		return nil // checks are not translated (see the package doc)
	case w == "DROP" && len(rest) > 0 && (rest[0].Word() == "CONSTRAINT" || rest[0].Word() == "PARTITION"):
		return unsupported("DROP %s", rest[0].Word())
	case w == "DROP":
		if len(rest) > 0 && rest[0].Word() == "COLUMN" {
			rest = rest[1:]
		}
		if mysqltok.Words(rest, "IF", "EXISTS") {
			rest = rest[2:]
		}
		if len(rest) != 1 || !rest[0].IsName() {
			return unsupported("DROP form %q", mysqltok.Spaced(spec))
		}
		if err := checkName(rest[0].Name()); err != nil {
			return err
		}
		c := rest[0].Name()
		// MySQL compares column names ignoring case: a name the table
		// has in another case is not "already dropped".
		r.emit(doBlock("IF NOT " + hasColumn(t, c) + " AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = " + regclass(t.sql()) +
			" AND lower(attname) = lower(" + literal(c) + ") AND attnum > 0 AND NOT attisdropped) THEN " +
			raise(codeUndefinedColumn, fmt.Sprintf("column %s of table %s is there in another case: the DDL's names must match the downstream's", c, t)) + " END IF;"))
		r.emit(alter + "DROP COLUMN IF EXISTS " + quote(c))
		return nil
	case w == "MODIFY" || w == "CHANGE":
		if len(rest) > 0 && rest[0].Word() == "COLUMN" {
			rest = rest[1:]
		}
		if err := r.needCatalog(w + " COLUMN"); err != nil {
			return err
		}
		old := ""
		if w == "CHANGE" {
			if len(rest) == 0 || !rest[0].IsName() {
				return unsupported("CHANGE COLUMN form")
			}
			old, rest = rest[0].Name(), rest[1:]
		}
		return r.modifyColumn(t, old, rest)
	case w == "ALTER" && len(rest) > 0 && rest[0].Word() == "INDEX":
		// ALTER INDEX i VISIBLE|INVISIBLE: visibility is the planner's.
		if len(rest) == 3 && (rest[2].Word() == "VISIBLE" || rest[2].Word() == "INVISIBLE") {
			return nil
		}
		return unsupported("ALTER INDEX form")
	case w == "ALTER":
		if len(rest) > 0 && rest[0].Word() == "COLUMN" {
			rest = rest[1:]
		}
		if len(rest) < 2 || !rest[0].IsName() {
			return unsupported("ALTER COLUMN form")
		}
		c := rest[0].Name()
		switch {
		case mysqltok.Words(rest[1:], "DROP", "DEFAULT") && len(rest) == 3:
			r.emit(alter + "ALTER COLUMN " + quote(c) + " DROP DEFAULT")
			return nil
		case mysqltok.Words(rest[1:], "SET", "DEFAULT") && len(rest) > 3:
			return r.setDefault(t, c, rest[3:])
		case len(rest) == 3 && rest[1].Word() == "SET" && (rest[2].Word() == "VISIBLE" || rest[2].Word() == "INVISIBLE"):
			return nil
		}
		return unsupported("ALTER COLUMN form %q", mysqltok.Spaced(spec))
	case w == "RENAME" && len(rest) == 4 && rest[0].Word() == "COLUMN" && rest[1].IsName() && rest[2].Word() == "TO" && rest[3].IsName():
		return r.renameColumn(t, rest[1].Name(), rest[3].Name())
	case w == "RENAME" && len(rest) == 4 && (rest[0].Word() == "INDEX" || rest[0].Word() == "KEY") && rest[1].IsName() && rest[2].Word() == "TO" && rest[3].IsName():
		return r.renameIndex(t, rest[1].Name(), rest[3].Name())
	}
	return r.tableOption(spec)
}

// tableOption accepts the ALTER TABLE clauses that change nothing
// PostgreSQL keeps: storage, character set and TiDB options.
func (r *rewriter) tableOption(spec []mysqltok.Token) error {
	w := spec[0].Word()
	switch w {
	case "ENGINE", "AUTO_INCREMENT", "COMMENT", "CHARSET", "COLLATE", "ROW_FORMAT", "KEY_BLOCK_SIZE", "ALGORITHM", "LOCK",
		"FORCE", "AVG_ROW_LENGTH", "CHECKSUM", "COMPRESSION", "MAX_ROWS", "MIN_ROWS", "PACK_KEYS", "STATS_AUTO_RECALC",
		"STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "SHARD_ROW_ID_BITS", "PRE_SPLIT_REGIONS", "AUTO_ID_CACHE",
		"AUTO_RANDOM_BASE", "CACHE", "NOCACHE", "PLACEMENT", "TTL", "TTL_ENABLE", "TTL_JOB_INTERVAL", "REMOVE":
		if w == "REMOVE" {
			if mysqltok.Words(spec, "REMOVE", "TTL") {
				return nil
			}
			return unsupported("%s", mysqltok.Spaced(spec))
		}
		return nil
	case "DEFAULT", "CHARACTER", "CONVERT":
		for _, t := range spec {
			if strings.EqualFold(t.Name(), "binary") {
				return unsupported("%s (text columns would become binary)", mysqltok.Spaced(spec))
			}
		}
		return nil
	}
	return unsupported("ALTER TABLE clause %q", mysqltok.Spaced(spec))
}

// addColumn: ADD [COLUMN] def. Existing rows must get what MySQL gives them,
// and the log does not carry those values: a NOT NULL column without a
// DEFAULT gets MySQL's implicit default (0, the empty string, the first ENUM member…), and
// a default PostgreSQL cannot give the same (CURRENT_TIMESTAMP, a zero date,
// an expression) is refused when the table has rows, by a check run with the
// statements.
func (r *rewriter) addColumn(t qname, def []mysqltok.Token) error {
	c, err := parseColumn(def)
	if err != nil {
		return err
	}
	alter := "ALTER TABLE " + t.sql() + " "
	why := ""
	implicit := ""
	switch {
	case c.def != nil && c.def.mode != defExact:
		why = "its DEFAULT " + c.def.why
	case c.def == nil && c.notNull:
		implicit = implicitDefault(&c.typ)
		if implicit == "" {
			why = "it is NOT NULL without a DEFAULT: MySQL gives the rows the type's implicit default, which PostgreSQL has no value for"
		}
	}
	if why != "" {
		r.emit(doBlock("IF NOT " + hasColumn(t, c.name) + " AND EXISTS (SELECT 1 FROM " + t.sql() + ") THEN " +
			raise(codeNotSupported, fmt.Sprintf("cannot add column %s to table %s, which has rows: %s", c.name, t, why)) + " END IF;"))
	}
	s := c.sql()
	if implicit != "" {
		s += " DEFAULT " + implicit
	}
	r.emit(alter + "ADD COLUMN IF NOT EXISTS " + s)
	if implicit != "" {
		r.emit(alter + "ALTER COLUMN " + quote(c.name) + " DROP DEFAULT")
	}
	r.columnComment(t, c)
	if c.pk {
		if err := r.createKey(t, &key{kind: "PRIMARY", name: primaryName, cols: []string{c.name}, parts: quote(c.name)}); err != nil {
			return err
		}
	}
	if c.unique {
		if err := r.needCatalog("ADD COLUMN … UNIQUE"); err != nil {
			return err
		}
		used, err := r.indexNames(t)
		if err != nil {
			return err
		}
		if err := r.createKey(t, &key{kind: "UNIQUE", name: freeName(c.name, used), cols: []string{c.name}, parts: quote(c.name)}); err != nil {
			return err
		}
	}
	return nil
}

// renameColumn renames a to b, unless a is gone and b there (a replay).
func (r *rewriter) renameColumn(t qname, a, b string) error {
	if err := checkName(a, b); err != nil {
		return err
	}
	if a == b {
		return nil
	}
	r.emit(doBlock("IF " + hasColumn(t, a) + " OR NOT " + hasColumn(t, b) + " THEN ALTER TABLE " + t.sql() +
		" RENAME COLUMN " + quote(a) + " TO " + quote(b) + "; END IF;"))
	return nil
}

// renameIndex renames index a of t to b, unless a is gone and b there.
func (r *rewriter) renameIndex(t qname, a, b string) error {
	if err := checkName(a, b); err != nil {
		return err
	}
	if strings.EqualFold(a, primaryName) || strings.EqualFold(b, primaryName) {
		return unsupported("RENAME INDEX of PRIMARY")
	}
	pa, pb := objectName(t.name, a), objectName(t.name, b)
	if pa == pb {
		return nil
	}
	r.emit(doBlock("IF " + regclass(t.in(pa)) + " IS NOT NULL OR " + regclass(t.in(pb)) + " IS NULL THEN ALTER INDEX " + t.in(pa) +
		" RENAME TO " + quote(pb) + "; END IF;"))
	r.indexComment(t, b)
	return nil
}
