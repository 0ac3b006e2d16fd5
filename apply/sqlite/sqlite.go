package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	modernc "modernc.org/sqlite" // also registers the "sqlite" database/sql driver

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqliteddl"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Sink is the SQLite sink. Besides apply.Sink it has MaxOpenTxs() int, 1
// (apply.TxLimiter: SQLite has one writer), DB() *sql.DB, the database it
// writes, and IgnoredDDLs() int64, the DDLs whose effect was found already
// there (see apply.SinkOptions.StrictDDL).
type Sink = sqlsink.SQLSink

// Schemes are the URI schemes this package registers with apply.Open.
var Schemes = []string{"sqlite", "sqlite3"}

func init() {
	sqlsink.Register(sqlsink.SQLite, &sqlsink.Driver{Transient: transient, AlreadyApplied: alreadyApplied, Rewrite: rewrite,
		DuplicateKey: duplicateKey, NoSuchTable: noSuchTable}, Schemes, Open)
}

// Open opens the sink a URI names:
//
//	sqlite:///absolute/path.db[?param=value&...]
//	sqlite:relative/path.db[?param=value&...]
//
// (sqlite3: too). The params are modernc.org/sqlite DSN parameters; the sink
// adds the pragmas busy_timeout(10000), journal_mode(WAL) and
// synchronous(NORMAL), and _txlock=immediate, each unless the URI sets it.
// Open creates the file and the progress table if they are missing.
//
// A dry run (opts.DryRun) changes nothing, the file included: an existing
// file is opened read-only, and a missing one is not created (the dry run
// reads an empty database in memory instead).
func Open(ctx context.Context, uri string, opts *apply.SinkOptions) (*Sink, error) {
	dsn, path, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	if opts != nil && opts.DryRun != nil {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			dsn = "file::memory:"
		} else {
			dsn = strings.Replace(dsn, "?", "?mode=ro&", 1)
			dsn = strings.Replace(dsn, "&_pragma=journal_mode%28WAL%29", "", 1)
		}
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("apply: open %s: %w", uri, err)
	}
	s, err := sqlsink.New(ctx, db, sqlsink.SQLite, opts, uri, true)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// New makes a SQLite sink over a database the caller opened (with driver
// name "sqlite") and closes. The sink holds one connection of it for its
// life. New creates the progress table if it is missing.
func New(ctx context.Context, db *sql.DB, opts *apply.SinkOptions) (*Sink, error) {
	return sqlsink.New(ctx, db, sqlsink.SQLite, opts, "", false)
}

// parseURI turns a sqlite: URI into a modernc.org/sqlite DSN, and the
// database file's path.
func parseURI(uri string) (dsn, path string, err error) {
	scheme, rest, _ := strings.Cut(uri, ":")
	if s := strings.ToLower(scheme); s != "sqlite" && s != "sqlite3" {
		return "", "", apply.BadURI(uri, "want sqlite:///absolute/path.db or sqlite:relative/path.db")
	}
	var query string
	switch {
	case strings.HasPrefix(rest, "//"):
		u, err := url.Parse(uri)
		if err != nil {
			return "", "", apply.BadURI(uri, "does not parse as a URL")
		}
		if u.User != nil {
			return "", "", apply.BadURI(uri, "sqlite takes no user or password")
		}
		if u.Host != "" {
			return "", "", apply.BadURI(uri, "want sqlite:///absolute/path.db or sqlite:relative/path.db, not a host (%q)", u.Host)
		}
		path, query = u.Path, u.RawQuery
	default:
		path, query, _ = strings.Cut(rest, "?")
		if path, err = url.PathUnescape(path); err != nil {
			return "", "", apply.BadURI(uri, "bad escape in the path")
		}
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return "", "", apply.BadURI(uri, "no database file")
	}
	if path == ":memory:" || strings.HasPrefix(path, "/:memory:") {
		return "", "", apply.BadURI(uri, "an in-memory database would vanish with the sink")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", apply.BadURI(uri, "bad query: %v", err)
	}
	// Defaults, unless the URI sets the same pragma: WAL lets readers look
	// while the apply runs; synchronous=NORMAL is safe with WAL (a crash
	// can lose the last commits but never tears one, and the progress
	// table is in the same commits, so a re-run redoes them).
	set := map[string]bool{}
	for _, p := range q["_pragma"] {
		name := strings.ToLower(strings.TrimSpace(p))
		if i := strings.IndexAny(name, "(= "); i >= 0 {
			name = name[:i]
		}
		set[name] = true
	}
	for _, p := range []string{"busy_timeout(10000)", "journal_mode(WAL)", "synchronous(NORMAL)"} {
		name, _, _ := strings.Cut(p, "(")
		if !set[name] {
			q.Add("_pragma", p)
		}
	}
	if !q.Has("_txlock") {
		// Take the write lock at BEGIN, so a busy database fails (and is
		// retried) before any statement ran.
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode(), path, nil
}

// rewrite turns a logged MySQL DDL into SQLite statements. It reads the
// catalog (in the DDL's transaction, before any of them runs) for what
// SQLite's per-file index names need: a renamed table's indexes are dropped
// and created again under the new table's prefix, and dropping an index that
// is not there while its table is fails rather than pass for "already
// applied".
func rewrite(ctx context.Context, q sqlsink.Queryer, ddl *codec.DDL) ([]string, error) {
	stmts, err := sqliteddl.Rewrite(ddl)
	if err != nil {
		return nil, err
	}
	c := catalog{ctx: ctx, q: q, tables: map[string]*liteTable{}}
	var out []string
	for _, st := range stmts {
		switch st.Op {
		case sqliteddl.OpCreateTable:
			t, err := c.table(st.Table)
			if err != nil {
				return nil, err
			}
			t.exists = true
		case sqliteddl.OpDropTable:
			c.tables[fold(st.Table)] = &liteTable{}
		case sqliteddl.OpCreateIndex:
			t, err := c.table(st.Table)
			if err != nil {
				return nil, err
			}
			if st.Auto != "" {
				// MySQL's name for an index without one: the first
				// column's, or the first of _2, _3, … the table lacks.
				name := sqliteddl.IndexName(st.Table, st.Auto)
				for n := 2; t.index(name) >= 0; n++ {
					name = sqliteddl.IndexName(st.Table, st.Auto+"_"+strconv.Itoa(n))
				}
				if st.SQL, err = sqliteddl.RecreateIndex(st.SQL, name, st.Table); err != nil {
					return nil, err
				}
				st.Index = name
			}
			if t.index(st.Index) < 0 {
				t.indexes = append(t.indexes, liteIndex{name: st.Index, sql: st.SQL})
			}
		case sqliteddl.OpDropIndex:
			t, err := c.table(st.Table)
			if err != nil {
				return nil, err
			}
			i := t.index(st.Index)
			if i < 0 && t.exists {
				// Its table is there, so the DROP has not run (SQLite runs
				// a DDL and its progress in one transaction): the index
				// was never made, or is under a name this rewrite does
				// not know. Either way, not something to skip quietly.
				return nil, fmt.Errorf("apply: table %q has no index %q in SQLite", st.Table, st.Index)
			}
			if i >= 0 {
				t.indexes = slices.Delete(t.indexes, i, i+1)
			}
		case sqliteddl.OpRenameIndex:
			t, err := c.table(st.Table)
			if err != nil {
				return nil, err
			}
			i := t.index(st.Index)
			if i < 0 {
				return nil, fmt.Errorf("apply: table %q has no index %q in SQLite", st.Table, st.Index)
			}
			if t.index(st.To) >= 0 {
				return nil, fmt.Errorf("apply: table %q has an index %q already", st.Table, st.To)
			}
			sql, err := sqliteddl.RecreateIndex(t.indexes[i].sql, st.To, st.Table)
			if err != nil {
				return nil, err
			}
			out = append(out, "DROP INDEX "+sqliteddl.Quote(st.Index), sql)
			t.indexes[i] = liteIndex{name: st.To, sql: sql}
			continue
		case sqliteddl.OpDropColumn:
			stmts, err := c.dropColumn(st)
			if err != nil {
				return nil, err
			}
			out = append(out, stmts...)
			continue
		case sqliteddl.OpRenameTable:
			from, err := c.table(st.Table)
			if err != nil {
				return nil, err
			}
			// The rename first: SQLite then rewrites each index's ON
			// clause, and the index is recreated from its table's new
			// name.
			out = append(out, st.SQL)
			moved := &liteTable{exists: from.exists, pk: from.pk}
			for _, ix := range from.indexes {
				suffix, ok := cutFold(ix.name, st.Table+".")
				if !ok {
					// Not a name of this sink's making: SQLite renames
					// nothing, and neither do we.
					moved.indexes = append(moved.indexes, ix)
					continue
				}
				name := sqliteddl.IndexName(st.To, suffix)
				sql, err := sqliteddl.RecreateIndex(ix.sql, name, st.To)
				if err != nil {
					return nil, fmt.Errorf("apply: rename of table %q: %w", st.Table, err)
				}
				out = append(out, "DROP INDEX "+sqliteddl.Quote(ix.name), sql)
				moved.indexes = append(moved.indexes, liteIndex{name: name, sql: sql})
			}
			c.tables[fold(st.Table)] = &liteTable{}
			c.tables[fold(st.To)] = moved
			continue
		}
		out = append(out, st.SQL)
	}
	return out, nil
}

// catalog is the tables and indexes of the SQLite database as a DDL's
// statements leave them: read from sqlite_master the first time a table is
// named, then changed as each statement would.
type catalog struct {
	ctx    context.Context
	q      sqlsink.Queryer
	tables map[string]*liteTable // by fold(name)
}

type liteTable struct {
	exists  bool
	indexes []liteIndex
	pk      []string // the columns of its primary key
}

type liteIndex struct{ name, sql string }

func (t *liteTable) index(name string) int {
	return slices.IndexFunc(t.indexes, func(ix liteIndex) bool { return fold(ix.name) == fold(name) })
}

// table returns what the catalog holds of table name. SQLite's names are
// case-insensitive in ASCII, as COLLATE NOCASE and fold are.
func (c *catalog) table(name string) (*liteTable, error) {
	if t := c.tables[fold(name)]; t != nil {
		return t, nil
	}
	t := &liteTable{}
	rows, err := c.q.QueryContext(c.ctx, "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = ? COLLATE NOCASE AND type IN ('table', 'view', 'index')", name)
	if err != nil {
		return nil, fmt.Errorf("apply: reading the catalog of table %q: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, iname string
		var text sql.NullString
		if err := rows.Scan(&typ, &iname, &text); err != nil {
			return nil, fmt.Errorf("apply: reading the catalog of table %q: %w", name, err)
		}
		switch {
		case typ != "index":
			t.exists = true
		case text.Valid: // not an automatic index of a UNIQUE or PRIMARY KEY constraint
			t.indexes = append(t.indexes, liteIndex{name: iname, sql: text.String})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("apply: reading the catalog of table %q: %w", name, err)
	}
	rows.Close()
	if t.exists {
		pk, err := c.q.QueryContext(c.ctx, "SELECT name FROM pragma_table_info(?) WHERE pk > 0", name)
		if err != nil {
			return nil, fmt.Errorf("apply: reading the columns of table %q: %w", name, err)
		}
		defer pk.Close()
		for pk.Next() {
			var col string
			if err := pk.Scan(&col); err != nil {
				return nil, fmt.Errorf("apply: reading the columns of table %q: %w", name, err)
			}
			t.pk = append(t.pk, col)
		}
		if err := pk.Err(); err != nil {
			return nil, fmt.Errorf("apply: reading the columns of table %q: %w", name, err)
		}
	}
	c.tables[fold(name)] = t
	return t, nil
}

// dropColumn is what ALTER TABLE … DROP COLUMN c runs, as MySQL does it:
// SQLite refuses to drop a column an index holds, so each index holding c
// is dropped first, and those with other columns are created again without
// c, under their names, after the drop (a unique index stays unique on the
// rest). A column of the primary key is refused: MySQL drops it from the
// key, and SQLite alters no key. When the table is gone, or has no column
// c, the drop runs as it is, and fails with what counts as a drop already
// applied.
func (c *catalog) dropColumn(st sqliteddl.Stmt) ([]string, error) {
	t, err := c.table(st.Table)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(t.pk, func(k string) bool { return fold(k) == fold(st.Column) }) {
		return nil, fmt.Errorf("%w: column %q of table %q is in its primary key, which SQLite cannot alter", apply.ErrUnsupportedDDL, st.Column, st.Table)
	}
	var drops, creates []string
	kept := t.indexes[:0:0]
	for _, ix := range t.indexes {
		sql, has, left, err := sqliteddl.IndexWithoutColumn(ix.sql, st.Column)
		if err != nil {
			return nil, fmt.Errorf("apply: dropping column %q of table %q from its index %q: %w", st.Column, st.Table, ix.name, err)
		}
		if !has {
			kept = append(kept, ix)
			continue
		}
		drops = append(drops, "DROP INDEX "+sqliteddl.Quote(ix.name))
		if left > 0 {
			creates = append(creates, sql)
			kept = append(kept, liteIndex{name: ix.name, sql: sql})
		}
	}
	t.indexes = kept
	return slices.Concat(drops, []string{st.SQL}, creates), nil
}

// fold folds ASCII letters to lower case, as SQLite compares names.
func fold(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// cutFold cuts prefix off s, comparing as SQLite compares names.
func cutFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || fold(s[:len(prefix)]) != fold(prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// duplicateKey: SQLITE_CONSTRAINT_UNIQUE (2067) or _PRIMARYKEY (1555).
func duplicateKey(err error) bool {
	var se *modernc.Error
	return errors.As(err, &se) && (se.Code() == 2067 || se.Code() == 1555)
}

func noSuchTable(err error) bool {
	var se *modernc.Error
	return errors.As(err, &se) && strings.Contains(se.Error(), "no such table")
}

func transient(err error) bool {
	var se *modernc.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
			return true
		}
	}
	return false
}

func alreadyApplied(err error, action codec.ActionType) bool {
	var se *modernc.Error
	if !errors.As(err, &se) {
		return false
	}
	msg := se.Error()
	if strings.Contains(msg, "error in ") && strings.Contains(msg, " after ") {
		// SQLite checks the whole schema after an ALTER TABLE, and fails
		// naming another object that the change breaks ("error in index
		// t.i after drop column: no such column: c", "error in view v
		// after rename: …"): a refusal, never an effect already there.
		return false
	}
	if strings.Contains(msg, "already exists") || strings.Contains(msg, "duplicate column name") {
		return true
	}
	switch action {
	case codec.ActionDropTable, codec.ActionDropIndex, codec.ActionDropColumn, codec.ActionDropView:
		return strings.Contains(msg, "no such table") || strings.Contains(msg, "no such index") ||
			strings.Contains(msg, "no such column")
	}
	return false
}
