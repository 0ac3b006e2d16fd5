package pgddl

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"
)

// maxIdent is PostgreSQL's identifier limit in bytes (NAMEDATALEN-1). A
// longer name is truncated by the server with a mere NOTICE, which would
// silently merge two names: names are checked or hashed here instead.
const maxIdent = 63

// qname is a schema-qualified table (or view) name.
type qname struct{ schema, name string }

func (q qname) folded() qname  { return qname{strings.ToLower(q.schema), strings.ToLower(q.name)} }
func (q qname) sql() string    { return quote(q.schema) + "." + quote(q.name) }
func (q qname) String() string { return q.schema + "." + q.name }

// in returns the schema-qualified name of an object (an index) in q's
// schema.
func (q qname) in(name string) string { return quote(q.schema) + "." + quote(name) }

// quote quotes an identifier for PostgreSQL.
func quote(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// literal renders s as a PostgreSQL string constant. E'…' with backslashes
// escaped reads the same whatever standard_conforming_strings says.
func literal(s string) string {
	if !strings.ContainsRune(s, '\\') {
		return "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	s = strings.ReplaceAll(s, `\`, `\\`)
	return "E'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// objectName is the PostgreSQL name of the MySQL index (or primary key) obj
// of table: "table.obj". MySQL names indexes per table, PostgreSQL per
// schema, so the table is part of the name; a name over 63 bytes keeps a
// prefix and appends a hash of both names, so that it stays unique and
// deterministic. A hashed name's index carries the MySQL name in its comment
// (indexComment), for renames to find.
//
// MySQL compares index names ignoring case, so the index part is lower-cased
// (but PRIMARY, which no other index may be called): DROP INDEX IDX finds the
// index CREATE INDEX idx made.
func objectName(table, obj string) string {
	obj = foldName(obj)
	return fit(table+"."+obj, table+"\x00"+obj)
}

func foldName(obj string) string {
	if strings.EqualFold(obj, primaryName) {
		return primaryName
	}
	return strings.ToLower(obj)
}

// fit returns s, or when s is longer than maxIdent bytes, a prefix of it
// (cut at a character boundary) and "~" and 12 hex digits of the hash of key.
func fit(s, key string) string {
	if len(s) <= maxIdent {
		return s
	}
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:6])
	cut := maxIdent - len(h) - 1
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "~" + h
}

// hashedName reports whether objectName had to hash.
func hashedName(table, obj string) bool { return len(table)+1+len(foldName(obj)) > maxIdent }

// indexCommentPrefix starts the comment of an index whose name is hashed;
// the MySQL index name follows.
const indexCommentPrefix = "mysql index: "

// columnCommentPrefix starts the comment of a column whose PostgreSQL type
// loses what a later MODIFY needs to know (ENUM and SET members, BIT); the
// MySQL type follows.
const columnCommentPrefix = "mysql type: "

// primaryName is MySQL's name of every primary key.
const primaryName = "PRIMARY"
