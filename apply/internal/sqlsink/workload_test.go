package sqlsink_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// workload generates a log of row changes and DDLs over a few tables, and
// keeps the state the downstream must end in (the model).
//
//	t1 (id PK, v, n)          inserts, updates, key-changing updates, deletes;
//	                          ADD COLUMN extra half-way
//	t2 (a, b) composite PK    the same; TRUNCATE at 70 %
//	t3 (u) handle key that is a unique key, no PK
//	t4 no key at all          inserts and deletes: replaying one twice shows
//	t5 (id PK, v)             created at 30 %, dropped at 90 %
//
// Each commit ts is one upstream transaction that changes a row at most once
// (its final state), and its events come shuffled, so that the sink's
// deletes-first order within a commit ts is needed: some transactions move
// a row onto the key another row left in the same transaction.
type workload struct {
	rng    *rand.Rand
	schema string
	ts     uint64
	events []*codec.Event
	rows   map[string]map[string][]codec.Column // table → key → image
	exists map[string]bool
	extra  bool // t1 has the extra column
	nextID int64
}

var workloadTables = []string{"t1", "t2", "t3", "t4", "t5"}

func newWorkload(seed uint64, schema string, txns int) *workload {
	w := &workload{rng: rand.New(rand.NewPCG(seed, 7)), schema: schema, rows: map[string]map[string][]codec.Column{},
		exists: map[string]bool{}, nextID: 1}
	w.ts = 100
	w.ddl("t1", codec.ActionCreateTable, "CREATE TABLE t1 (id BIGINT NOT NULL, v VARCHAR(64), n BIGINT, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4")
	w.ts++
	w.ddl("t2", codec.ActionCreateTable, "CREATE TABLE `t2` (`a` BIGINT NOT NULL, `b` VARCHAR(16) NOT NULL, `v` VARCHAR(64) DEFAULT NULL, PRIMARY KEY (`a`, `b`))")
	w.ts++
	// Two DDLs at one commit ts: the progress counts DDLs within a ts.
	w.ddl("t3", codec.ActionCreateTable, "CREATE TABLE t3 (u BIGINT NOT NULL, v VARCHAR(64), UNIQUE KEY uk (u))")
	w.ddl("t4", codec.ActionCreateTable, "CREATE TABLE t4 (a BIGINT, v VARCHAR(64))")
	for i := 0; i < txns; i++ {
		w.ts += 1 + uint64(w.rng.IntN(3))
		w.txn()
		switch i {
		case txns * 3 / 10:
			w.ts++
			w.ddl("t5", codec.ActionCreateTable, "CREATE TABLE t5 (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64))")
		case txns / 2:
			// At the ts of the transaction just made: its rows come first.
			w.ddl("t1", codec.ActionAddColumn, "ALTER TABLE t1 ADD COLUMN extra VARCHAR(32)")
			w.extra = true
			for k, img := range w.rows["t1"] {
				w.rows["t1"][k] = append(slices.Clone(img), nullCol("extra", codec.TypeVarchar))
			}
		case txns * 7 / 10:
			w.ddl("t2", codec.ActionTruncateTable, "TRUNCATE TABLE t2")
			clear(w.rows["t2"])
		case txns * 9 / 10:
			w.ts++
			w.ddl("t5", codec.ActionDropTable, "DROP TABLE t5")
		}
	}
	return w
}

func (w *workload) ddl(table string, action codec.ActionType, q string) {
	w.events = append(w.events, ddlEv(w.ts, w.schema, table, action, q))
	switch action {
	case codec.ActionCreateTable:
		w.exists[table] = true
		w.rows[table] = map[string][]codec.Column{}
	case codec.ActionDropTable:
		delete(w.exists, table)
		delete(w.rows, table)
	}
}

// image builds a row image of table with key id and a value derived from val.
func (w *workload) image(table string, id int64, val string) []codec.Column {
	v := scol("v", val)
	if w.rng.IntN(10) == 0 {
		v = nullCol("v", codec.TypeVarchar)
	}
	switch table {
	case "t1":
		img := []codec.Column{icol("id", id, pk), v, icol("n", id*3, codec.FlagNullable)}
		if w.extra {
			img = append(img, scol("extra", "x"+val))
		}
		return img
	case "t2":
		return []codec.Column{icol("a", id/3, pk), {Name: "b", Type: codec.TypeVarchar, Flags: pk, Value: codec.StringValue("b" + strconv.FormatInt(id%3, 10))}, v}
	case "t3":
		return []codec.Column{icol("u", id, codec.FlagHandleKey|codec.FlagUniqueKey), v}
	case "t4":
		return []codec.Column{icol("a", id%5, codec.FlagNullable), v}
	case "t5":
		return []codec.Column{icol("id", id, pk), v}
	}
	panic(table)
}

// setCol replaces the column of img named like c.
func setCol(img []codec.Column, c codec.Column) []codec.Column {
	for i := range img {
		if img[i].Name == c.Name {
			img[i] = c
			return img
		}
	}
	panic("no column " + c.Name)
}

func keyString(img []codec.Column) string {
	var b strings.Builder
	for _, i := range codec.KeyColumns(img) {
		b.WriteString(img[i].Value.String())
		b.WriteByte('/')
	}
	return b.String()
}

func (w *workload) existing(table string) []string {
	keys := make([]string, 0, len(w.rows[table]))
	for k := range w.rows[table] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// txn makes one transaction at w.ts over 1–3 tables.
func (w *workload) txn() {
	var evs []*codec.Event
	tables := []string{}
	for _, t := range workloadTables {
		if w.exists[t] && w.rng.IntN(2) == 0 {
			tables = append(tables, t)
		}
	}
	if len(tables) == 0 {
		tables = append(tables, "t1")
	}
	for _, t := range tables {
		touched := map[string]bool{}
		rows := w.rows[t]
		keyless := t == "t4"
		ops := 1 + w.rng.IntN(8)
		for range ops {
			keys := w.existing(t)
			var free []string // existing keys this txn has not touched
			for _, k := range keys {
				if !touched[k] {
					free = append(free, k)
				}
			}
			id := w.nextID
			val := fmt.Sprintf("v%d-%d", w.ts, id)
			r := w.rng.IntN(10)
			switch {
			case len(free) == 0 || r < 4: // insert
				w.nextID++
				img := w.image(t, id, val)
				k := keyString(img)
				if keyless {
					k = "row" + strconv.FormatInt(id, 10)
				}
				if touched[k] || rows[k] != nil {
					continue
				}
				touched[k] = true
				rows[k] = img
				evs = append(evs, rowEv(w.ts, w.schema, t, nil, img))
			case r < 6 && !keyless: // update in place
				k := free[w.rng.IntN(len(free))]
				pre := rows[k]
				post := setCol(slices.Clone(pre), scol("v", val))
				touched[k] = true
				rows[k] = post
				evs = append(evs, rowEv(w.ts, w.schema, t, pre, post))
			case r < 8 && !keyless: // move to a new key
				w.nextID++
				k := free[w.rng.IntN(len(free))]
				pre := rows[k]
				post := w.image(t, id, val)
				nk := keyString(post)
				if touched[nk] || rows[nk] != nil {
					continue
				}
				touched[k], touched[nk] = true, true
				delete(rows, k)
				rows[nk] = post
				evs = append(evs, rowEv(w.ts, w.schema, t, pre, post))
			case r < 9 && !keyless && len(free) >= 2: // move a row onto the key another one leaves
				i := w.rng.IntN(len(free))
				j := (i + 1 + w.rng.IntN(len(free)-1)) % len(free)
				k1, k2 := free[i], free[j]
				gone, mover := rows[k1], rows[k2]
				post := setCol(slices.Clone(gone), scol("v", val)) // the key of k1, the rest new
				if t == "t1" {
					post = setCol(post, icol("n", -id, codec.FlagNullable))
				}
				touched[k1], touched[k2] = true, true
				delete(rows, k2)
				rows[k1] = post
				evs = append(evs, rowEv(w.ts, w.schema, t, gone, nil), rowEv(w.ts, w.schema, t, mover, post))
			default: // delete
				k := free[w.rng.IntN(len(free))]
				touched[k] = true
				evs = append(evs, rowEv(w.ts, w.schema, t, rows[k], nil))
				delete(rows, k)
			}
		}
	}
	w.rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	w.events = append(w.events, evs...)
}

// want returns the model's dump of every workload table, as env.dump
// formats it.
func (w *workload) want() map[string][]string {
	m := map[string][]string{}
	for _, t := range workloadTables {
		if !w.exists[t] {
			m[t] = nil
			continue
		}
		m[t] = dumpImages(w.rows[t])
	}
	return m
}

func (w *workload) rowCount() int {
	n := 0
	for _, ev := range w.events {
		if ev.Kind == codec.RowEvent {
			n++
		}
	}
	return n
}

// diff describes how two dumps differ ("" when equal).
func diff(got, want map[string][]string) string {
	var b strings.Builder
	for _, t := range workloadTables {
		g, w := got[t], want[t]
		if slices.Equal(g, w) {
			continue
		}
		fmt.Fprintf(&b, "table %s: got %d rows, want %d", t, len(g), len(w))
		gs, ws := map[string]int{}, map[string]int{}
		for _, r := range g {
			gs[r]++
		}
		for _, r := range w {
			ws[r]++
		}
		shown := 0
		for _, r := range w {
			if gs[r] < ws[r] && shown < 5 {
				fmt.Fprintf(&b, "\n  missing %s", r)
				shown++
			}
		}
		for _, r := range g {
			if ws[r] < gs[r] && shown < 10 {
				fmt.Fprintf(&b, "\n  extra   %s", r)
				shown++
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestWorkload(t *testing.T) {
	cases := []struct {
		name string
		opts *apply.Options
	}{
		{"defaults", nil},
		{"tiny", &apply.Options{Workers: 1, BatchRows: 1, TxnRows: 1}},
		{"parallel", &apply.Options{Workers: 4, BatchRows: 7, TxnRows: 40, MaxBufferedRows: 30}},
	}
	for _, d := range []sqlsink.Dialect{sqlsink.SQLite, sqlsink.MySQL} {
		for _, c := range cases {
			t.Run(d.String()+"/"+c.name, func(t *testing.T) {
				e := newEnv(t, d)
				w := newWorkload(1, e.schema, 300)
				res := e.run(w.events, c.opts)
				if d := diff(e.dumpAll(workloadTables...), w.want()); d != "" {
					t.Fatalf("downstream differs from the model:\n%s", d)
				}
				if res.Events != int64(len(w.events)) || res.Rows != int64(w.rowCount()) || res.Skipped != 0 {
					t.Errorf("result %+v: want %d events, %d rows, 0 skipped", res, len(w.events), w.rowCount())
				}
				if res.DDLs != 8 {
					t.Errorf("DDLs = %d, want 8", res.DDLs)
				}
				if res.Transactions == 0 || res.Duration <= 0 {
					t.Errorf("result %+v", res)
				}
				// Everything is recorded: a second run skips it all.
				again := e.run(w.events, c.opts)
				if again.Skipped != int64(len(w.events)) || again.Rows != 0 || again.DDLs != 0 {
					t.Errorf("re-run: %+v, want every event skipped", again)
				}
				if d := diff(e.dumpAll(workloadTables...), w.want()); d != "" {
					t.Fatalf("after a re-run:\n%s", d)
				}
			})
		}
	}
}
