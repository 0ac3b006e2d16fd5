package sqlsink_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Foreign keys (issue 15). The log holds every change the upstream made,
// its own cascades included (TiDB logs the rows a cascade deleted or set to
// NULL), so the downstream must end holding exactly the rows the upstream
// holds whatever its foreign keys would do: a REPLACE of a parent must not
// cascade into its children, and a child written before its parent (another
// worker's table) must not be refused. By default the sink turns the checks
// off for its sessions; with SinkOptions.ForeignKeyChecks the checks stay
// on, and then an apply may fail — loudly — but never end in other rows.

// fkTables: a parent and one child per ON DELETE action, and a grandchild
// under the cascading child.
var fkTables = []string{"fk_p", "fk_cc", "fk_cr", "fk_cn", "fk_g"}

var fkDDLs = []struct{ table, ddl string }{
	{"fk_p", "CREATE TABLE fk_p (id INT NOT NULL PRIMARY KEY, v VARCHAR(16)) ENGINE=InnoDB"},
	{"fk_cc", "CREATE TABLE fk_cc (id INT NOT NULL PRIMARY KEY, pid INT, v VARCHAR(16), " +
		"CONSTRAINT fk_cc_p FOREIGN KEY (pid) REFERENCES fk_p (id) ON DELETE CASCADE) ENGINE=InnoDB"},
	{"fk_cr", "CREATE TABLE fk_cr (id INT NOT NULL PRIMARY KEY, pid INT, v VARCHAR(16), " +
		"CONSTRAINT fk_cr_p FOREIGN KEY (pid) REFERENCES fk_p (id) ON DELETE RESTRICT) ENGINE=InnoDB"},
	{"fk_cn", "CREATE TABLE fk_cn (id INT NOT NULL PRIMARY KEY, pid INT, v VARCHAR(16), " +
		"CONSTRAINT fk_cn_p FOREIGN KEY (pid) REFERENCES fk_p (id) ON DELETE SET NULL) ENGINE=InnoDB"},
	{"fk_g", "CREATE TABLE fk_g (id INT NOT NULL PRIMARY KEY, pid INT, v VARCHAR(16), " +
		"CONSTRAINT fk_g_cc FOREIGN KEY (pid) REFERENCES fk_cc (id) ON DELETE CASCADE) ENGINE=InnoDB"},
}

// fkLog builds a log over the fk tables and keeps the upstream's rows.
type fkLog struct {
	schema string
	ts     uint64
	events []*codec.Event
	txn    []*codec.Event // the open transaction's events
	rows   map[string]map[int64][]codec.Column
}

func newFKLog(schema string) *fkLog {
	l := &fkLog{schema: schema, ts: 10, rows: map[string]map[int64][]codec.Column{}}
	for _, d := range fkDDLs {
		l.events = append(l.events, ddlEv(l.ts, schema, d.table, codec.ActionCreateTable, d.ddl))
		l.rows[d.table] = map[int64][]codec.Column{}
	}
	return l
}

// begin starts a transaction at the next commit ts; commit appends its
// events, in the order given (or reversed: children before parents).
func (l *fkLog) begin() { l.ts++; l.txn = nil }

func (l *fkLog) commit(reverse bool) {
	if reverse {
		slices.Reverse(l.txn)
	}
	l.events = append(l.events, l.txn...)
	l.txn = nil
}

func fkImage(table string, id int64, pid *int64, v string) []codec.Column {
	img := []codec.Column{icol("id", id, pk)}
	if table != "fk_p" {
		if pid == nil {
			img = append(img, nullCol("pid", codec.TypeLong))
		} else {
			img = append(img, icol("pid", *pid, codec.FlagNullable|codec.FlagMultipleKey))
		}
	}
	return append(img, scol("v", v))
}

func (l *fkLog) ins(table string, id int64, pid *int64, v string) {
	img := fkImage(table, id, pid, v)
	l.rows[table][id] = img
	l.txn = append(l.txn, rowEv(l.ts, l.schema, table, nil, img))
}

func (l *fkLog) upd(table string, id int64, pid *int64, v string) {
	pre := l.rows[table][id]
	if pre == nil {
		panic(fmt.Sprintf("update of %s %d, which is not there", table, id))
	}
	img := fkImage(table, id, pid, v)
	l.rows[table][id] = img
	l.txn = append(l.txn, rowEv(l.ts, l.schema, table, pre, img))
}

func (l *fkLog) del(table string, id int64) {
	pre := l.rows[table][id]
	if pre == nil {
		panic(fmt.Sprintf("delete of %s %d, which is not there", table, id))
	}
	delete(l.rows[table], id)
	l.txn = append(l.txn, rowEv(l.ts, l.schema, table, pre, nil))
}

// pidOf returns a child's parent id, or nil.
func (l *fkLog) pidOf(table string, id int64) *int64 {
	c := l.rows[table][id][1]
	if c.Value.IsNull() {
		return nil
	}
	p := c.Value.Int()
	return &p
}

func (l *fkLog) vOf(table string, id int64) string {
	img := l.rows[table][id]
	return img[len(img)-1].Value.Text()
}

// children returns the ids of table's rows whose pid is parent, sorted.
func (l *fkLog) children(table string, parent int64) []int64 {
	var ids []int64
	for id := range l.rows[table] {
		if p := l.pidOf(table, id); p != nil && *p == parent {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// delParent deletes a parent as the upstream does, in the open
// transaction: the application deletes the RESTRICT children first, and
// the upstream's cascades delete the CASCADE children (and their
// grandchildren) and set the SET NULL children's pid to NULL; the log holds
// each of those changes.
func (l *fkLog) delParent(id int64) {
	for _, c := range l.children("fk_cr", id) {
		l.del("fk_cr", c)
	}
	for _, c := range l.children("fk_cc", id) {
		for _, g := range l.children("fk_g", c) {
			l.del("fk_g", g)
		}
		l.del("fk_cc", c)
	}
	for _, c := range l.children("fk_cn", id) {
		l.upd("fk_cn", c, nil, l.vOf("fk_cn", c))
	}
	l.del("fk_p", id)
}

// want is the upstream's rows as env.dump formats them.
func (l *fkLog) want() map[string][]string {
	m := map[string][]string{}
	for _, t := range fkTables {
		m[t] = dumpImages(l.rows[t])
	}
	return m
}

func fkID(v int64) *int64 { return &v }

// updateFamily writes the log of the update cases: parents 1 and 2; then,
// in one transaction, a child of each in every table of children (ids 10+p
// in fk_cc, 20+p in fk_cr, 30+p in fk_cn) and grandchild 41 of child 11;
// then updates of non-key columns, one transaction each: parent 1; parent 2
// with its child id in table (to v); child 11.
func (l *fkLog) updateFamily(children []string, table string, id int64, v string) {
	base := map[string]int64{"fk_cc": 10, "fk_cr": 20, "fk_cn": 30}
	l.begin()
	l.ins("fk_p", 1, nil, "p1")
	l.ins("fk_p", 2, nil, "p2")
	l.commit(false)
	l.begin()
	for _, p := range []int64{1, 2} {
		for _, c := range children {
			l.ins(c, base[c]+p, fkID(p), strings.TrimPrefix(c, "fk_"))
		}
	}
	l.ins("fk_g", 41, fkID(11), "g")
	l.commit(false)
	l.begin()
	l.upd("fk_p", 1, nil, "P1")
	l.commit(false)
	l.begin()
	l.upd("fk_p", 2, nil, "P2")
	l.upd(table, id, fkID(2), v)
	l.commit(false)
	l.begin()
	l.upd("fk_cc", 11, fkID(1), "CC1")
	l.commit(false)
}

// fkScenarios are the hand-made logs.
var fkScenarios = []struct {
	name  string
	seed  uint64 // rows at or below this commit ts are in the downstream before the apply (see checkFK)
	build func(l *fkLog)
}{
	// The downstream holds parents with CASCADE and SET NULL children (no
	// RESTRICT one, whose refusal would make the failure loud); the log
	// updates the parents' non-key column. A REPLACE of a parent with the
	// checks on deletes it first, and the downstream's own cascade takes
	// the children with it: silently.
	{"update-parent-seeded", 12, func(l *fkLog) {
		l.updateFamily([]string{"fk_cc", "fk_cn"}, "fk_cn", 32, "CN")
	}},
	// The upstream updates a parent's non-key column: its children stay (a
	// REPLACE downstream would delete the parent row first); and a child's:
	// the grandchild stays.
	{"update-parent-non-key", 0, func(l *fkLog) {
		l.updateFamily([]string{"fk_cc", "fk_cr", "fk_cn"}, "fk_cc", 12, "CC")
	}},
	{"insert-same-txn", 0, func(l *fkLog) {
		for p := int64(1); p <= 3; p++ {
			l.begin()
			l.ins("fk_p", p, nil, "p")
			l.ins("fk_cc", 10+p, fkID(p), "cc")
			l.ins("fk_cr", 20+p, fkID(p), "cr")
			l.ins("fk_cn", 30+p, fkID(p), "cn")
			l.ins("fk_g", 40+p, fkID(10+p), "g")
			l.commit(p%2 == 0) // children first, every other time
		}
	}},
	{"insert-across-txns", 0, func(l *fkLog) {
		for p := int64(1); p <= 3; p++ {
			l.begin()
			l.ins("fk_p", p, nil, "p")
			l.commit(false)
			l.begin()
			l.ins("fk_cc", 10+p, fkID(p), "cc")
			l.ins("fk_cr", 20+p, fkID(p), "cr")
			l.ins("fk_cn", 30+p, fkID(p), "cn")
			l.commit(false)
			l.begin()
			l.ins("fk_g", 40+p, fkID(10+p), "g")
			l.commit(false)
		}
	}},
	{"delete-child-then-parent", 0, func(l *fkLog) {
		l.begin()
		for p := int64(1); p <= 4; p++ {
			l.ins("fk_p", p, nil, "p")
			l.ins("fk_cc", 10+p, fkID(p), "cc")
			l.ins("fk_cr", 20+p, fkID(p), "cr")
			l.ins("fk_cn", 30+p, fkID(p), "cn")
			l.ins("fk_g", 40+p, fkID(10+p), "g")
		}
		l.commit(false)
		// In one transaction, in the upstream's order (children, then
		// the parent) and reversed.
		l.begin()
		l.delParent(1)
		l.commit(false)
		l.begin()
		l.delParent(2)
		l.commit(true)
		// Across transactions: the children first, the parent later.
		l.begin()
		l.del("fk_g", 43)
		l.del("fk_cc", 13)
		l.del("fk_cr", 23)
		l.upd("fk_cn", 33, nil, "orphan")
		l.commit(false)
		l.begin()
		l.del("fk_p", 3)
		l.commit(false)
	}},
}

// fkRandom is a log of random transactions over the fk tables: parents
// inserted alone or with children, children added, moved to another parent
// or deleted, non-key updates, and parents deleted with their cascades.
func fkRandom(l *fkLog, seed uint64, txns int) {
	rng := rand.New(rand.NewPCG(seed, 15))
	next := int64(1)
	id := func() int64 { next++; return next }
	pick := func(table string) (int64, bool) {
		ids := slices.Sorted(maps.Keys(l.rows[table]))
		if len(ids) == 0 {
			return 0, false
		}
		return ids[rng.IntN(len(ids))], true
	}
	children := []string{"fk_cc", "fk_cr", "fk_cn"}
	for range txns {
		l.begin()
		switch r := rng.IntN(10); {
		case r < 3 || len(l.rows["fk_p"]) < 3: // a parent, maybe with children
			p := id()
			l.ins("fk_p", p, nil, "p"+strconv.FormatInt(p, 10))
			for range rng.IntN(4) {
				c := id()
				tb := children[rng.IntN(3)]
				l.ins(tb, c, fkID(p), "c")
				if tb == "fk_cc" && rng.IntN(2) == 0 {
					l.ins("fk_g", id(), fkID(c), "g")
				}
			}
		case r < 5: // a child of an existing parent
			p, _ := pick("fk_p")
			tb := children[rng.IntN(3)]
			l.ins(tb, id(), fkID(p), "c")
			if c, ok := pick("fk_cc"); ok && tb != "fk_cc" {
				l.ins("fk_g", id(), fkID(c), "g")
			}
		case r < 7: // non-key updates
			p, _ := pick("fk_p")
			l.upd("fk_p", p, nil, "u"+strconv.FormatUint(l.ts, 10))
			tb := children[rng.IntN(3)]
			if c, ok := pick(tb); ok {
				np, _ := pick("fk_p")
				l.upd(tb, c, fkID(np), "m"+strconv.FormatUint(l.ts, 10)) // moved, maybe to its own parent
			}
		case r < 8: // a child deleted
			tb := children[rng.IntN(3)]
			if c, ok := pick(tb); ok {
				if tb == "fk_cc" {
					for _, g := range l.children("fk_g", c) {
						l.del("fk_g", g)
					}
				}
				l.del(tb, c)
			}
		default: // a parent deleted, with its cascades
			p, _ := pick("fk_p")
			l.delParent(p)
		}
		l.commit(rng.IntN(2) == 0)
	}
}

// checkFK applies events with so and o into a fresh env of dialect d and
// checks the end state, with the checks off and on.
//
// Rows at or below commit ts seed are not applied by Run: the test inserts
// them first, in log order, as rows the downstream already holds (after a
// first Run of the DDLs alone), so that what Run then does to them shows.
func checkFK(t *testing.T, d sqlsink.Dialect, l func(schema string) *fkLog, seed uint64, so *apply.SinkOptions, uriFK bool, o *apply.Options) {
	t.Helper()
	e := newEnv(t, d)
	if uriFK {
		e.uri += "?_pragma=foreign_keys(1)"
	}
	if d == sqlsink.MySQL {
		// With the checks on, a worker's insert of a child waits for the
		// lock on its parent, which another worker's open (and idle)
		// transaction holds: MariaDB's 50 s lock wait, retried as
		// transient, would take minutes to fail. Measured on the base
		// commit d33dd46: TestForeignKeysFreshApply hung that way.
		e.uri += "?innodb_lock_wait_timeout=2"
	}
	log := l(e.schema)
	events := log.events
	if seed > 0 {
		var ddls, rest []*codec.Event
		for _, ev := range events {
			switch {
			case ev.IsDDL():
				ddls = append(ddls, ev)
			case ev.CommitTs() > seed:
				rest = append(rest, ev)
			}
		}
		e.i15MustApply(so, ddls, nil)
		for _, ev := range events {
			if !ev.IsDDL() && ev.CommitTs() <= seed {
				e.fkInsertImage(ev.Row.Table.Name, ev.Row.Columns)
			}
		}
		events = rest
	}
	// The SQLite sink turns a URI's foreign_keys pragma off unless told,
	// so that run must succeed like the default. With ForeignKeyChecks the
	// apply keeps commit order across transactions and, inside one, writes
	// parents before children and deletes children before parents by the
	// downstream's keys (the logs here put children first every other
	// time): every run must succeed, with the upstream's rows.
	if _, err := e.i15Apply(so, events, o); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if df := fkDiff(e.dumpAll(fkTables...), log.want()); df != "" {
		t.Errorf("downstream differs from the upstream:\n%s", df)
	}
}

func fkDiff(got, want map[string][]string) string {
	var b strings.Builder
	for _, tb := range fkTables {
		g, w := got[tb], want[tb]
		if slices.Equal(g, w) {
			continue
		}
		fmt.Fprintf(&b, "table %s: got %d rows, want %d\n", tb, len(g), len(w))
		for _, r := range w {
			if !slices.Contains(g, r) {
				fmt.Fprintf(&b, "  missing %s\n", r)
			}
		}
		for _, r := range g {
			if !slices.Contains(w, r) {
				fmt.Fprintf(&b, "  extra   %s\n", r)
			}
		}
	}
	return b.String()
}

// fkOptions are the sink settings each FK test runs with. uriFK (SQLite
// only) opens the sink with a URI that turns SQLite's foreign keys on for
// its connection, as a user may: then, as with ForeignKeyChecks, the apply
// may fail loudly but must not cascade silently.
var fkOptions = []struct {
	name  string
	so    *apply.SinkOptions
	uriFK bool
}{
	{"default", nil, false},
	{"fk-checks-on", &apply.SinkOptions{ForeignKeyChecks: true}, false},
	{"uri-foreign-keys-on", nil, true},
}

var fkRunOptions = []struct {
	name string
	o    *apply.Options
}{
	{"workers4-tiny", &apply.Options{Workers: 4, BatchRows: 1, TxnRows: 1, MaxRetries: 2}},
	{"defaults", &apply.Options{MaxRetries: 2}}, // (fewer retries: see checkFK)
}

func TestForeignKeys(t *testing.T) {
	for _, d := range allDialects {
		for _, sc := range fkScenarios {
			for _, so := range fkOptions {
				if so.uriFK && d != sqlsink.SQLite {
					continue // the URI pragma is SQLite's
				}
				for _, ro := range fkRunOptions {
					t.Run(d.String()+"/"+sc.name+"/"+so.name+"/"+ro.name, func(t *testing.T) {
						checkFK(t, d, func(schema string) *fkLog {
							l := newFKLog(schema)
							sc.build(l)
							return l
						}, sc.seed, so.so, so.uriFK, ro.o)
					})
				}
			}
		}
	}
}

// TestForeignKeysFreshApply is the trial's case: a fresh apply of a log
// with several FK tables, ten times with four workers (it saw error 1452 in
// nine runs of ten: a worker wrote a child before another worker's parent).
func TestForeignKeysFreshApply(t *testing.T) {
	for _, d := range allDialects {
		for _, so := range fkOptions {
			if so.uriFK && d != sqlsink.SQLite {
				continue // the URI pragma is SQLite's
			}
			t.Run(d.String()+"/"+so.name, func(t *testing.T) {
				for run := range 10 {
					t.Run(strconv.Itoa(run), func(t *testing.T) {
						checkFK(t, d, func(schema string) *fkLog {
							l := newFKLog(schema)
							fkRandom(l, uint64(run+1), 120)
							return l
						}, 0, so.so, so.uriFK, &apply.Options{Workers: 4, BatchRows: 8, TxnRows: 32, MaxRetries: 2})
					})
				}
			})
		}
	}
}

// insertImage inserts a row image (of integers, strings and NULLs) with the
// admin connection.
func (e *env) fkInsertImage(table string, img []codec.Column) {
	e.t.Helper()
	var cols, marks []string
	var args []any
	for _, c := range img {
		cols = append(cols, e.dialect.Quote(c.Name))
		if e.dialect == sqlsink.Postgres {
			marks = append(marks, fmt.Sprintf("$%d", len(marks)+1))
		} else {
			marks = append(marks, "?")
		}
		switch c.Value.Kind() {
		case codec.KindNull:
			args = append(args, nil)
		case codec.KindInt:
			args = append(args, c.Value.Int())
		case codec.KindString:
			args = append(args, c.Value.Text())
		default:
			e.t.Fatalf("insertImage: a %v value", c.Value.Kind())
		}
	}
	e.exec("INSERT INTO "+e.table(table)+" ("+strings.Join(cols, ", ")+") VALUES ("+strings.Join(marks, ", ")+")", args...)
}
