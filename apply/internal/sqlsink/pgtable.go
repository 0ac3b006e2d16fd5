package sqlsink

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// What the PostgreSQL sink knows of a table's columns is true only until the
// next DDL of the table: the statements pgx prepared for it (and, on every
// dialect, the unique keys and columns the sink read from the catalog: see
// afterDDL in units.go).

// pgGens says, for the tables DDLs of the PostgreSQL sinks of this process
// named, which DDL last did. Every row statement of a table carries its
// generation in a comment (see text), so a statement written after a DDL of
// its table is never one written before it, even when their text is
// otherwise the same.
//
// pgx's database/sql connections prepare each statement once, on its first
// run, and run it again by its text from a cache of their own. PostgreSQL
// fixes a prepared statement's parameter types at its preparation: after a
// DDL changed a column from an integer to a VARCHAR, the statement written
// for the integer column binds '0031' as the integer 31, which the server
// then stores as '31' (and a delete by that column finds no text equal to
// an integer, or the wrong row). The server re-plans a prepared statement
// after a DDL, but it never retypes its parameters, and pgx's cache keeps
// the old description; neither can be reached on every pooled connection,
// so the text itself changes. The generations are the process's (two sinks
// may share a *sql.DB given to New). A row statement names one table, and
// only a DDL naming that table (as its table, among its tables, or as
// either side of a rename) changes its columns; a DDL whose tables the sink
// cannot tell (a schema's, one naming none, a rename whose query does not
// parse) moves every table to a new generation. Until the first DDL a
// statement carries no comment. DDLs run on the downstream by others than
// the sink are not counted.
var pgGens struct {
	mu     sync.Mutex
	ddls   uint64                 // DDLs run (or tried)
	all    uint64                 // the value of ddls at the last DDL that named every table
	tables map[apply.Table]uint64 // by lower-case name: the value of ddls at the last DDL naming it
}

// pgDDL records a DDL of a PostgreSQL sink that named tables, or every
// table.
func pgDDL(tables []apply.Table, all bool) {
	pgGens.mu.Lock()
	defer pgGens.mu.Unlock()
	pgGens.ddls++
	if all {
		pgGens.all = pgGens.ddls
		clear(pgGens.tables)
		return
	}
	if pgGens.tables == nil {
		pgGens.tables = map[apply.Table]uint64{}
	}
	for _, t := range tables {
		pgGens.tables[foldTable(t)] = pgGens.ddls
	}
}

// pgGen is table's generation: 0 before any DDL.
func pgGen(table apply.Table) uint64 {
	pgGens.mu.Lock()
	defer pgGens.mu.Unlock()
	return max(pgGens.all, pgGens.tables[foldTable(table)])
}

// foldTable is the key of a table among those a DDL names: a DDL may spell
// a name in another case than the row changes do, and forgetting more than
// needed costs nothing but a read.
func foldTable(t apply.Table) apply.Table {
	return apply.Table{Schema: strings.ToLower(t.Schema), Name: strings.ToLower(t.Name)}
}

// ddlTables returns the tables a DDL may change the columns, keys or rows
// of, or all when it cannot tell: a schema's DDL, one that names no table,
// a rename whose query does not parse.
func ddlTables(ddl *codec.DDL) (tables []apply.Table, all bool) {
	if ddl.Table.Name == "" {
		return nil, true
	}
	tables = append(tables, apply.TableOf(ddl.Table))
	for _, t := range ddl.Tables {
		if t.Name == "" {
			return nil, true
		}
		tables = append(tables, apply.TableOf(t.TableName))
	}
	renames, err := apply.DDLRenames(ddl)
	if err != nil {
		return nil, true
	}
	for _, r := range renames {
		tables = append(tables, r[0], r[1])
	}
	return tables, false
}

// query is the text the statement in t.buf, of table, runs as: the same,
// except on PostgreSQL after a DDL (see pgGens).
func (t *sqlTx) query(table apply.Table) string { return t.text(table, t.buf) }

// text is the text statement b, of table, runs as (see query).
func (t *sqlTx) text(table apply.Table, b []byte) string {
	if t.s.d != Postgres {
		return string(b)
	}
	n := pgGen(table)
	if n == 0 {
		return string(b)
	}
	// Past len(b): what an error shows of b stays as it was.
	b = append(b, " /* ddl "...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, " */"...)
	return string(b)
}

// DDLTables tells Run which tables' open transactions a DDL must wait for
// (apply.DDLScoper): the tables it names or renames (ddlTables) and those a
// foreign key links to them either way, whose locks a DDL may take too. The
// foreign keys are read from the catalog again only after a DDL that may
// add or move one (movesForeignKeys): MariaDB's answer takes 2 ms, at
// every DDL; one a DDL dropped only makes a DDL wait for more. On SQLite,
// whose one session runs the DDL inside its open transaction, it names the
// DDL's tables alone, without their schemas (apply.EventDDLScoper). It
// cannot tell (ok false, every worker commits first) for a DDL naming no
// table or a schema; for one
// that may add a foreign key (REFERENCES, FOREIGN), which locks the
// referenced table, not yet in the catalog; for one that may read or take
// another table's rows (SELECT, LIKE, EXCHANGE); in a dry run; and on a pool
// with a limit of open connections given by the caller, where the
// workers' open transactions could hold every connection the DDL needs.
func (s *SQLSink) DDLTables(ctx context.Context, ddl *codec.DDL) ([]apply.Table, bool, error) {
	if s.o.DryRun != nil || s.d != SQLite && (s.lite != nil || s.db.Stats().MaxOpenConnections > 0) {
		return nil, false, nil
	}
	tables, all := ddlTables(ddl)
	if all {
		return nil, false, nil
	}
	q := strings.ToUpper(ddl.Query)
	if strings.Contains(q, "REFERENCES") || strings.Contains(q, "FOREIGN") {
		return nil, false, nil
	}
	// A DDL that may read or take another table's rows (CREATE TABLE … AS
	// SELECT, … LIKE, EXCHANGE PARTITION … WITH TABLE) must see them all
	// committed, as the log's order says they were.
	if strings.Contains(q, "SELECT") || strings.Contains(q, "LIKE") || strings.Contains(q, "EXCHANGE") ||
		ddl.Type == codec.ActionExchangeTablePartition {
		return nil, false, nil
	}
	if s.d == SQLite {
		// One writer, and with foreign-key checks off no DDL of SQLite's
		// acts on another table's rows: the DDL's own tables are its scope
		// (ScopesFromEvent), by name alone, for SQLite has no schemas. With
		// the checks on, Run hands out in commit order and asks nothing.
		for i := range tables {
			tables[i].Schema = ""
		}
		return tables, true, nil
	}
	s.fkMu.Lock()
	fks := s.scopeFKs
	s.fkMu.Unlock()
	if fks == nil {
		var err error
		if fks, err = s.foreignKeys(ctx, s.db); err != nil {
			return nil, false, err
		}
		s.fkMu.Lock()
		s.scopeFKs = fks
		s.fkMu.Unlock()
	}
	named := len(tables)
	for c, ps := range fks {
		for _, p := range ps {
			for _, t := range tables[:named] {
				if strings.EqualFold(t.Schema, c.Schema) && strings.EqualFold(t.Name, c.Name) {
					tables = append(tables, p)
				}
				if strings.EqualFold(t.Schema, p.Schema) && strings.EqualFold(t.Name, p.Name) {
					tables = append(tables, c)
				}
			}
		}
	}
	return tables, true, nil
}

// ScopesFromEvent reports whether DDLTables answers from the DDL alone
// (apply.EventDDLScoper): on SQLite, outside a dry run (which prints the
// statements in the log's order).
func (s *SQLSink) ScopesFromEvent() bool { return s.d == SQLite && s.o.DryRun == nil }

// movesForeignKeys reports whether a DDL may add a foreign key, or move one
// to other table names: one that may add a foreign key (REFERENCES,
// FOREIGN), renames a table, or names no table.
func movesForeignKeys(ddl *codec.DDL) bool {
	q := strings.ToUpper(ddl.Query)
	if strings.Contains(q, "REFERENCES") || strings.Contains(q, "FOREIGN") {
		return true
	}
	if _, all := ddlTables(ddl); all {
		return true
	}
	renames, err := apply.DDLRenames(ddl)
	return err != nil || len(renames) > 0
}
