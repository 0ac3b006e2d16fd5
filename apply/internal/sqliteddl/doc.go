// Package sqliteddl rewrites the MySQL DDL of a redo log into statements
// SQLite can run, for the SQLite sink (see package
// github.com/redokit/redokit/apply/sqlite, "Values" and "DDL", for the
// column types it declares and the forms it takes). It is a token-level
// rewrite, not a parser, and imports no database driver: it reads no
// catalog. Each statement says what it does to tables and indexes (Stmt.Op),
// so that its caller, which can read the catalog, renames a table's indexes
// with the table (RecreateIndex), checks an index exists before dropping
// it, and takes a dropped column out of the indexes that hold it
// (IndexWithoutColumn), as MySQL does and SQLite refuses to.
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
