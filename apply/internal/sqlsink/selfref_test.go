package sqlsink_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// Issue 27, finding 6: with the foreign-key checks on, a table whose rows
// reference rows of the same table (or of a table that references it back)
// stopped the apply on MariaDB and SQLite: the parents-first order of a
// transaction's tables (ApplyGroup) cannot order the rows of one table, so
// a row referencing a row the transaction writes later, or a parent deleted
// in the statement before its children, failed the check although the
// transaction's end state is consistent. The checks must see each
// transaction's end state, as PostgreSQL's end-of-statement checks do here,
// and still refuse, loudly, an end state that breaks a key.

// srLog is a log over a self-referencing table emp (mgr → emp.id) and a
// pair of tables that reference each other (dept.head → staff.id,
// staff.dept → dept.id), with the upstream's rows.
type srLog struct {
	schema string
	ts     uint64
	events []*codec.Event
	rows   map[string]map[int64][]codec.Column
}

var srTables = []string{"emp", "dept", "staff"}

func newSRLog(d sqlsink.Dialect, schema string) *srLog {
	l := &srLog{schema: schema, ts: 10, rows: map[string]map[int64][]codec.Column{}}
	ddls := []string{
		"CREATE TABLE emp (id BIGINT NOT NULL PRIMARY KEY, mgr BIGINT, v VARCHAR(16), KEY mgr (mgr), " +
			"CONSTRAINT emp_mgr FOREIGN KEY (mgr) REFERENCES emp (id)) ENGINE=InnoDB",
		"CREATE TABLE dept (id BIGINT NOT NULL PRIMARY KEY, head BIGINT, v VARCHAR(16), KEY head (head)) ENGINE=InnoDB",
		"CREATE TABLE staff (id BIGINT NOT NULL PRIMARY KEY, dept BIGINT, v VARCHAR(16), KEY dept (dept), " +
			"CONSTRAINT staff_dept FOREIGN KEY (dept) REFERENCES dept (id)) ENGINE=InnoDB",
		// The key that closes the cycle. (SQLite's DDL rewrite has no ADD
		// CONSTRAINT; SQLite takes a key to a table created later, so its
		// dept declares it in CREATE TABLE.)
		"ALTER TABLE dept ADD CONSTRAINT dept_head FOREIGN KEY (head) REFERENCES staff (id)",
	}
	if d == sqlsink.SQLite {
		ddls[1] = "CREATE TABLE dept (id BIGINT NOT NULL PRIMARY KEY, head BIGINT, v VARCHAR(16), KEY head (head), " +
			"CONSTRAINT dept_head FOREIGN KEY (head) REFERENCES staff (id))"
		ddls = ddls[:3]
	}
	for _, q := range ddls {
		table := strings.Fields(q)[2]
		l.events = append(l.events, ddlEv(l.ts, schema, table, codec.ActionCreateTable, q))
		l.ts++
	}
	for _, t := range srTables {
		l.rows[t] = map[int64][]codec.Column{}
	}
	return l
}

func srImage(table string, id int64, ref *int64, v string) []codec.Column {
	refCol := map[string]string{"emp": "mgr", "dept": "head", "staff": "dept"}[table]
	img := []codec.Column{icol("id", id, pk)}
	if ref == nil {
		img = append(img, nullCol(refCol, codec.TypeLonglong))
	} else {
		img = append(img, icol(refCol, *ref, codec.FlagNullable|codec.FlagMultipleKey))
	}
	return append(img, scol("v", v))
}

// txn appends one upstream transaction at the next commit ts: each change
// is "+table id ref v" (insert or update), or "-table id" (delete), with
// ref "-" for NULL, written into the log in the order given.
func (l *srLog) txn(changes ...string) {
	l.ts++
	for _, c := range changes {
		f := strings.Fields(c)
		table, id := f[0][1:], int64(0)
		fmt.Sscan(f[1], &id)
		pre := l.rows[table][id]
		if f[0][0] == '-' {
			if pre == nil {
				panic(fmt.Sprintf("delete of %s %d, which is not there", table, id))
			}
			delete(l.rows[table], id)
			l.events = append(l.events, rowEv(l.ts, l.schema, table, pre, nil))
			continue
		}
		var ref *int64
		if f[2] != "-" {
			var r int64
			fmt.Sscan(f[2], &r)
			ref = &r
		}
		img := srImage(table, id, ref, f[3])
		l.rows[table][id] = img
		l.events = append(l.events, rowEv(l.ts, l.schema, table, pre, img))
	}
}

// keyMove changes the key of table's row from to to, as UPDATE t SET id = to
// WHERE id = from does upstream with ON UPDATE CASCADE: the rows
// referencing it are updated to the new key in the same transaction (the
// children first here: the log keeps no order that helps).
func (l *srLog) keyMove(table string, from, to int64) {
	l.ts++
	for _, id := range slices.Sorted(maps.Keys(l.rows[table])) {
		img := l.rows[table][id]
		if img[1].Value.IsNull() || img[1].Value.Int() != from {
			continue
		}
		post := srImage(table, id, &to, img[2].Value.Text())
		l.events = append(l.events, rowEv(l.ts, l.schema, table, img, post))
		l.rows[table][id] = post
	}
	pre := l.rows[table][from]
	var ref *int64
	if !pre[1].Value.IsNull() {
		r := pre[1].Value.Int()
		ref = &r
	}
	post := srImage(table, to, ref, pre[2].Value.Text())
	l.events = append(l.events, rowEv(l.ts, l.schema, table, pre, post))
	delete(l.rows[table], from)
	l.rows[table][to] = post
}

func (l *srLog) want() map[string][]string {
	m := map[string][]string{}
	for _, t := range srTables {
		m[t] = dumpImages(l.rows[t])
	}
	return m
}

// srScenarios are legal logs: each must apply with the checks on, to the
// upstream's rows. pg: whether PostgreSQL applies it too (its checks run at
// the end of each statement, not of the transaction).
var srScenarios = []struct {
	name  string
	pg    bool
	build func(l *srLog)
}{
	// Rows referencing rows inserted later in the same transaction, and a
	// chain of them: the manager has the highest id, and comes last.
	{"forward-references", true, func(l *srLog) {
		l.txn("+emp 1 3 e1", "+emp 2 3 e2", "+emp 3 - boss")
		l.txn("+emp 4 5 e4", "+emp 5 6 e5", "+emp 6 - top", "+emp 7 4 e7")
	}},
	// A manager deleted with its reports in one transaction: the manager
	// has the lowest id, so a delete by key order meets it first.
	{"delete-manager-and-reports", true, func(l *srLog) {
		l.txn("+emp 10 - boss", "+emp 11 10 a", "+emp 12 10 b", "+emp 20 - other")
		l.txn("-emp 10", "-emp 11", "-emp 12")
		// Reports deleted first in the log, and a manager kept.
		l.txn("+emp 30 20 x", "+emp 31 30 y")
		l.txn("-emp 31", "-emp 30")
	}},
	// Reports moved to a manager the same transaction inserts, and the old
	// manager deleted. (PostgreSQL deletes the old manager before it
	// writes the reports' new images.)
	{"reparent", false, func(l *srLog) {
		l.txn("+emp 40 - old", "+emp 41 40 a", "+emp 42 40 b")
		l.txn("+emp 41 39 a2", "+emp 42 39 b2", "-emp 40", "+emp 39 - new")
	}},
	// A manager's key moves, its reports with it (ON UPDATE CASCADE
	// upstream). PostgreSQL deletes the old key in one statement and
	// writes the reports' new images in another: its check of the delete
	// sees the reports still pointing at it.
	{"key-move", false, func(l *srLog) {
		l.txn("+emp 50 - boss", "+emp 51 50 a", "+emp 52 50 b", "+emp 53 51 c")
		l.keyMove("emp", 50, 60)
		l.keyMove("emp", 51, 49)
	}},
	// Two tables referencing each other, written in one transaction, in
	// either order, and deleted together. (PostgreSQL writes the tables
	// in separate statements, and checks each at its end.)
	{"cycle", false, func(l *srLog) {
		l.txn("+dept 1 100 d1", "+staff 100 1 s100", "+staff 101 1 s101")
		l.txn("+staff 102 2 s102", "+dept 2 102 d2")
		l.txn("-staff 100", "-staff 101", "-dept 1")
		l.txn("-dept 2", "-staff 102")
	}},
}

// srRun applies a log into a fresh env of dialect d with the checks on.
func srRun(t *testing.T, d sqlsink.Dialect, build func(*srLog), o *apply.Options) (*env, *srLog, error) {
	t.Helper()
	e := newEnv(t, d)
	if d == sqlsink.MySQL {
		e.uri += "?innodb_lock_wait_timeout=2" // see checkFK
	}
	l := newSRLog(d, e.schema)
	build(l)
	_, err := e.i15Apply(&apply.SinkOptions{ForeignKeyChecks: true}, l.events, o)
	return e, l, err
}

func TestSelfReferenceForeignKeyChecks(t *testing.T) {
	for _, d := range allDialects {
		for _, sc := range srScenarios {
			if d == sqlsink.Postgres && !sc.pg {
				continue
			}
			for _, ro := range fkRunOptions {
				t.Run(d.String()+"/"+sc.name+"/"+ro.name, func(t *testing.T) {
					e, l, err := srRun(t, d, sc.build, ro.o)
					if err != nil {
						t.Fatalf("Run with foreign-key checks on: %v", err)
					}
					if df := srDiff(e.dumpAll(srTables...), l.want()); df != "" {
						t.Errorf("downstream differs from the upstream:\n%s", df)
					}
				})
			}
		}
	}
}

// TestSelfReferenceForeignKeyViolation: a transaction whose end state breaks
// a key of a self-referencing table (a report of a manager the log never
// writes; a manager deleted from under a report) is refused, loudly, naming
// what broke, and nothing of it is committed. And the checks a deferred
// transaction turned off are on again for the next one in the same
// database transaction: a staff row of a department the log never writes,
// after a deferred transaction of emp, is refused too.
func TestSelfReferenceForeignKeyViolation(t *testing.T) {
	perTxn := &apply.Options{TxnRows: 1, MaxRetries: 2}
	cases := []struct {
		name  string
		table string         // the table the error names
		o     *apply.Options // TxnRows 1: each upstream transaction commits alone
		emp   int            // the rows of emp committed
		build func(l *srLog)
	}{
		{"missing-parent", "emp", perTxn, 3, func(l *srLog) {
			l.txn("+emp 1 - boss", "+emp 2 1 a", "+emp 6 1 z")
			l.txn("+emp 3 2 b", "+emp 4 99 orphan", "+emp 5 3 c")
		}},
		{"deleted-parent", "emp", perTxn, 3, func(l *srLog) {
			l.txn("+emp 1 - boss", "+emp 2 1 a", "+emp 3 1 b")
			// The manager and one report deleted, the other report left
			// pointing at it: an upstream whose checks were off.
			l.ts++
			for _, id := range []int64{1, 2} {
				l.events = append(l.events, rowEv(l.ts, l.schema, "emp", l.rows["emp"][id], nil))
			}
		}},
		{"checks-on-again", "staff", &apply.Options{MaxRetries: 2}, 0, func(l *srLog) {
			l.txn("+emp 1 2 a", "+emp 2 - boss")
			l.txn("+staff 5 77 s")
		}},
	}
	for _, d := range []sqlsink.Dialect{sqlsink.MySQL, sqlsink.SQLite} {
		for _, c := range cases {
			t.Run(d.String()+"/"+c.name, func(t *testing.T) {
				var last uint64
				e, _, err := srRun(t, d, func(l *srLog) { c.build(l); last = l.ts }, c.o)
				if err == nil {
					t.Fatal("Run applied a transaction that breaks a foreign key")
				}
				t.Logf("refused: %v", err)
				if apply.IsTransient(err) || !strings.Contains(strings.ToLower(err.Error()), "foreign key") ||
					!strings.Contains(err.Error(), c.table) {
					t.Errorf("err = %v, want a foreign-key error naming %s", err, c.table)
				}
				var se *apply.StatementError
				if d == sqlsink.MySQL && errors.As(err, &se) && se.FirstTs != last {
					t.Errorf("err names commit ts %d, want %d", se.FirstTs, last)
				}
				// The transactions before committed, the breaking one not.
				if got := e.dump("emp"); len(got) != c.emp || c.emp > 0 && !strings.HasPrefix(got[0], "1|NULL|") {
					t.Errorf("emp = %q, want %d rows", got, c.emp)
				}
				if got := e.dump("staff"); len(got) != 0 {
					t.Errorf("staff = %q, want none", got)
				}
			})
		}
	}
}

func srDiff(got, want map[string][]string) string {
	var b strings.Builder
	for _, tb := range srTables {
		if g, w := got[tb], want[tb]; !slices.Equal(g, w) {
			fmt.Fprintf(&b, "table %s: got %q, want %q\n", tb, g, w)
		}
	}
	return b.String()
}
