// Package sqliteddl rewrites the MySQL DDL of a redo log into statements
// SQLite can run, for the SQLite sink (see package
// github.com/redokit/redokit/apply/sqlite for the forms it takes). It is a
// token-level rewrite, not a parser, and imports no database driver.
package sqliteddl

// quote quotes an identifier for SQLite.
func quote(name string) string {
	b := make([]byte, 0, len(name)+2)
	b = append(b, '"')
	for i := 0; i < len(name); i++ {
		if name[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, name[i])
	}
	return string(append(b, '"'))
}
