package postgres

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
)

// log27 builds the events of a test log on one schema.
type log27 struct {
	schema string
	events []codec.Event
}

func (l *log27) table(name string) codec.TableName { return codectest.Table(l.schema, name, 1) }

func (l *log27) ddl(ts uint64, table string, action codec.ActionType, query string) {
	l.events = append(l.events, codectest.DDL(ts, l.table(table), action, query, codectest.Affected(l.table(table))))
}

func (l *log27) row(ts uint64, table string, pre, post []codec.Column) {
	l.events = append(l.events, codectest.Update(ts, l.table(table), pre, post))
}

// dump27 returns a table's rows as text, "|"-joined, sorted.
func (s *server) dump27(table string) []string {
	s.t.Helper()
	rows, err := s.admin.Query(fmt.Sprintf(`SELECT * FROM %q.%q`, s.schema, table))
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]*string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			s.t.Fatal(err)
		}
		parts := make([]string, len(cols))
		for i, v := range vals {
			parts[i] = "NULL"
			if v != nil {
				parts[i] = *v
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func pkInt(name string, v int64) codec.Column {
	return codectest.Int(name, v, codec.FlagPrimaryKey|codec.FlagHandleKey)
}

func pkStr(name, v string) codec.Column {
	c := codectest.Str(name, v)
	c.Flags = codec.FlagPrimaryKey | codec.FlagHandleKey
	c.Collation = "utf8mb4_bin"
	return c
}

func intCol(name string, v int64) codec.Column {
	return codectest.Int(name, v, codec.FlagNullable)
}

func strCol(name, v string) codec.Column {
	c := codectest.Str(name, v)
	c.Flags = codec.FlagNullable
	c.Charset, c.Collation = "utf8mb4", "utf8mb4_bin"
	return c
}

func cols(c ...codec.Column) []codec.Column { return c }

// TestTypeChangeStatements (issue 27, finding 1): after a DDL changes a
// column's type — MODIFY, or a drop and an add of the column by the same
// name — a statement of the same text as one run before the DDL must not
// reuse what was prepared for the old type: '0031' written into a column
// that was an integer stays '0031', not '31', in an upsert, in a delete's
// key, and in a keyless table's delete. The sink's pool is one connection,
// so every statement after the DDL meets that connection's cache.
func TestTypeChangeStatements(t *testing.T) {
	for _, c := range []struct {
		name string
		ddls []string // turning c (and k) from INT into VARCHAR(10)
	}{
		{"modify", []string{"ALTER TABLE %s MODIFY c VARCHAR(10)"}},
		{"drop and add", []string{"ALTER TABLE %s DROP COLUMN c", "ALTER TABLE %s ADD COLUMN c VARCHAR(10)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, sink, l := oneConnSink(t)
			l.ddl(11, "t", codec.ActionCreateTable, "CREATE TABLE t (id INT PRIMARY KEY, c INT)")
			l.ddl(12, "nk", codec.ActionCreateTable, "CREATE TABLE nk (c INT)")
			l.ddl(13, "k", codec.ActionCreateTable, "CREATE TABLE k (k INT PRIMARY KEY, v INT)")
			ts := uint64(20)
			// Before: every statement shape once, with integers.
			for i := range int64(3) {
				l.row(ts, "t", nil, cols(pkInt("id", i), intCol("c", 5)))
				l.row(ts+1, "nk", nil, cols(intCol("c", 5)))
				l.row(ts+2, "nk", cols(intCol("c", 5)), nil)
				l.row(ts+3, "k", nil, cols(pkInt("k", 7), intCol("v", 1)))
				l.row(ts+4, "k", cols(pkInt("k", 7), intCol("v", 1)), nil)
				ts += 5
			}
			for i, q := range c.ddls {
				l.ddl(100+uint64(i), "t", codec.ActionModifyColumn, fmt.Sprintf(q, "t"))
			}
			for i, q := range c.ddls {
				l.ddl(110+uint64(i), "nk", codec.ActionModifyColumn, fmt.Sprintf(q, "nk"))
			}
			l.ddl(120, "k", codec.ActionModifyColumn, "ALTER TABLE k MODIFY k VARCHAR(10)")
			// After: the same statements' shapes, with strings.
			ts = 200
			var want, wantNK, wantK []string
			for i := range int64(3) {
				v := fmt.Sprintf("00%d1", i+3)
				l.row(ts, "t", nil, cols(pkInt("id", 10+i), strCol("c", v)))
				l.row(ts+1, "t", cols(pkInt("id", i), intCol("c", 5)), cols(pkInt("id", i), strCol("c", v)))
				want = append(want, fmt.Sprintf("%d|%s", i, v), fmt.Sprintf("%d|%s", 10+i, v))
				l.row(ts+2, "nk", nil, cols(strCol("c", v)))
				l.row(ts+3, "nk", nil, cols(strCol("c", "0"+v)))
				l.row(ts+4, "nk", cols(strCol("c", "0"+v)), nil)
				wantNK = append(wantNK, v)
				l.row(ts+5, "k", nil, cols(pkStr("k", "007"), intCol("v", 1)))
				l.row(ts+6, "k", cols(pkStr("k", "007"), intCol("v", 1)), nil)
				l.row(ts+7, "k", nil, cols(pkStr("k", "7"), intCol("v", 2)))
				l.row(ts+8, "k", cols(pkStr("k", "7"), intCol("v", 2)), nil)
				l.row(ts+9, "k", nil, cols(pkStr("k", v), intCol("v", i)))
				wantK = append(wantK, fmt.Sprintf("%s|%d", v, i))
				ts += 10
			}
			slices.Sort(want)
			slices.Sort(wantNK)
			slices.Sort(wantK)
			res, err := apply.Run(context.Background(), apply.SliceSource(l.events), sink,
				&apply.Options{Workers: 1, BatchRows: 1, TxnRows: 1})
			if err != nil {
				t.Fatalf("Run: %v (%+v)", err, res)
			}
			for table, w := range map[string][]string{"t": want, "nk": wantNK, "k": wantK} {
				if got := s.dump27(table); !slices.Equal(got, w) {
					t.Errorf("%s holds %q, want %q", table, got, w)
				}
			}
		})
	}
}

// model27 is what a log's row changes leave, by table and key text: each
// change deletes its old image's row and writes its new image.
type model27 map[string]map[string][]codec.Column

func (m model27) apply(table string, pre, post []codec.Column) {
	if m[table] == nil {
		m[table] = map[string][]codec.Column{}
	}
	if pre != nil {
		delete(m[table], pre[0].Value.String())
	}
	if post != nil {
		m[table][post[0].Value.String()] = post
	}
}

func (m model27) dump(table string) []string {
	var out []string
	for _, img := range m[table] {
		parts := make([]string, len(img))
		for i, c := range img {
			switch c.Value.Kind() {
			case codec.KindNull:
				parts[i] = "NULL"
			case codec.KindInt:
				parts[i] = fmt.Sprint(c.Value.Int())
			default:
				parts[i] = c.Value.Text()
			}
		}
		out = append(out, strings.Join(parts, "|"))
	}
	slices.Sort(out)
	return out
}

// TestUniqueValueMoves (issue 27, finding 2): a unique value that moves
// from one row to another is legal in a log, at one commit ts (one upstream
// transaction, whose row changes come in any order) and across the commit
// ts of one batch, and so are chains and swaps of unique values. Each
// scenario's rows before it are committed first (a DDL is a barrier); then
// the scenarios apply in one batch (the default options), or a commit ts at
// a time, or with foreign-key checks on, and every row must be the log's; a
// rerun skips everything and changes nothing.
func TestUniqueValueMoves(t *testing.T) {
	for _, c := range []struct {
		name string
		opts apply.Options
		sink apply.SinkOptions
	}{
		{"one batch", apply.Options{}, apply.SinkOptions{}},
		{"batch per ts", apply.Options{BatchRows: 1, Workers: 2}, apply.SinkOptions{}},
		{"small statements", apply.Options{Workers: 1}, apply.SinkOptions{MaxStatementRows: 2}},
		{"foreign-key checks", apply.Options{}, apply.SinkOptions{ForeignKeyChecks: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t)
			l := &log27{schema: s.schema}
			m := model27{}
			l.ddl(10, "", codec.ActionCreateSchema, "CREATE DATABASE "+s.schema)
			l.ddl(11, "u", codec.ActionCreateTable, "CREATE TABLE u (id INT PRIMARY KEY, u INT, v VARCHAR(10), UNIQUE KEY uu (u))")
			l.ddl(12, "m", codec.ActionCreateTable, "CREATE TABLE m (id INT PRIMARY KEY, a INT, b INT, UNIQUE KEY ab (a, b))")
			// A key of a case-insensitive collation: the batch is not
			// reduced to one change per key (the commit-ts-by-commit-ts
			// order).
			l.ddl(13, "ci", codec.ActionCreateTable, "CREATE TABLE ci (k VARCHAR(10) PRIMARY KEY, u INT, UNIQUE KEY uu (u))")
			// A table no unique key but the primary key's: its rows go as
			// they always did.
			l.ddl(14, "p", codec.ActionCreateTable, "CREATE TABLE p (id INT PRIMARY KEY, u INT)")

			u := func(id, uv int64) []codec.Column {
				return cols(pkInt("id", id), intCol("u", uv), strCol("v", fmt.Sprint("v", id, "-", uv)))
			}
			mm := func(id, a, b int64) []codec.Column { return cols(pkInt("id", id), intCol("a", a), intCol("b", b)) }
			ci := func(k string, uv int64) []codec.Column {
				c := pkStr("k", k)
				c.Collation = "utf8mb4_general_ci"
				return cols(c, intCol("u", uv))
			}
			p := func(id, uv int64) []codec.Column { return cols(pkInt("id", id), intCol("u", uv)) }
			type change struct {
				table     string
				pre, post []codec.Column
			}
			// before: committed before the scenarios; after: by commit ts.
			var before []change
			var after [][]change
			ins := func(table string, img []codec.Column) change { return change{table, nil, img} }
			upd := func(table string, pre, post []codec.Column) change { return change{table, pre, post} }
			del := func(table string, img []codec.Column) change { return change{table, img, nil} }
			for _, base := range []int64{0, 100} { // once on u, once on ci
				tb, img := "u", func(id, uv int64) []codec.Column { return u(id+base, uv+base) }
				if base > 0 {
					tb, img = "ci", func(id, uv int64) []codec.Column { return ci(fmt.Sprint("K", id+base), uv+base) }
				}
				// 1, 2: at one commit ts, A moves from 1 to 2 and B takes
				// 1; the taker comes first, or last.
				before = append(before, ins(tb, img(1, 1)), ins(tb, img(3, 11)))
				after = append(after,
					[]change{ins(tb, img(2, 1)), upd(tb, img(1, 1), img(1, 2))},
					[]change{upd(tb, img(3, 11), img(3, 12)), ins(tb, img(4, 11))})
				// 3: across commit ts: A moves, B takes its value; A is
				// deleted, C takes its value, A comes back with another.
				before = append(before, ins(tb, img(5, 21)))
				after = append(after,
					[]change{upd(tb, img(5, 21), img(5, 22))},
					[]change{ins(tb, img(6, 21))},
					[]change{del(tb, img(5, 22))},
					[]change{ins(tb, img(7, 22))},
					[]change{ins(tb, img(5, 23))})
				// 4: a chain at one ts: D takes A's 31, A takes B's 32, B
				// takes C's 33, C takes 34.
				before = append(before, ins(tb, img(8, 31)), ins(tb, img(9, 32)), ins(tb, img(10, 33)))
				after = append(after, []change{ins(tb, img(11, 31)), upd(tb, img(8, 31), img(8, 32)),
					upd(tb, img(9, 32), img(9, 33)), upd(tb, img(10, 33), img(10, 34))})
				// 5: a swap at one ts.
				before = append(before, ins(tb, img(12, 41)), ins(tb, img(13, 42)))
				after = append(after, []change{upd(tb, img(12, 41), img(12, 42)), upd(tb, img(13, 42), img(13, 41))})
				// 6: a swap across commit ts, through a value no row holds.
				before = append(before, ins(tb, img(14, 51)), ins(tb, img(15, 52)))
				after = append(after,
					[]change{upd(tb, img(14, 51), img(14, 59))},
					[]change{upd(tb, img(15, 52), img(15, 51))},
					[]change{upd(tb, img(14, 59), img(14, 52))})
				// 7: a key change that takes another row's unique value, which
				// moves at the same ts; and a three-way rotation.
				before = append(before, ins(tb, img(16, 61)), ins(tb, img(17, 62)),
					ins(tb, img(18, 71)), ins(tb, img(19, 72)), ins(tb, img(20, 73)))
				after = append(after,
					[]change{upd(tb, img(16, 61), img(26, 62)), upd(tb, img(17, 62), img(17, 61))},
					[]change{upd(tb, img(18, 71), img(18, 72)), upd(tb, img(19, 72), img(19, 73)), upd(tb, img(20, 73), img(20, 71))})
			}
			// A swap of a two-column unique key.
			before = append(before, ins("m", mm(1, 1, 1)), ins("m", mm(2, 1, 2)), ins("m", mm(3, 1, 3)))
			after = append(after,
				[]change{upd("m", mm(1, 1, 1), mm(1, 1, 2)), upd("m", mm(2, 1, 2), mm(2, 1, 1)), ins("m", mm(4, 1, 3)), del("m", mm(3, 1, 3))})
			// Updates of a table with no other unique key.
			before = append(before, ins("p", p(1, 1)), ins("p", p(2, 1)))
			after = append(after, []change{upd("p", p(1, 1), p(1, 2)), upd("p", p(2, 1), p(2, 2)), ins("p", p(3, 2))})

			ts := uint64(100)
			for _, ch := range before {
				l.row(ts, ch.table, ch.pre, ch.post)
				m.apply(ch.table, ch.pre, ch.post)
				ts++
			}
			// A barrier: every row before it is committed.
			l.ddl(ts, "other", codec.ActionCreateTable, "CREATE TABLE other (id INT PRIMARY KEY)")
			ts++
			for _, changes := range after {
				for _, ch := range changes {
					l.row(ts, ch.table, ch.pre, ch.post)
					m.apply(ch.table, ch.pre, ch.post)
				}
				ts++
			}
			check := func(when string) {
				t.Helper()
				for _, table := range []string{"u", "m", "ci", "p"} {
					if got, want := s.dump27(table), m.dump(table); !slices.Equal(got, want) {
						t.Errorf("%s: %s holds\n%q, want\n%q", when, table, got, want)
					}
				}
			}
			for i, when := range []string{"run", "rerun"} {
				sink, err := s.open(s.dsn, c.sink)
				if err != nil {
					t.Fatal(err)
				}
				res, err := apply.Run(context.Background(), apply.SliceSource(l.events), sink, &c.opts)
				if err != nil {
					t.Fatalf("%s: %v", when, err)
				}
				if i == 1 && (res.Rows != 0 || res.DDLs != 0 || res.Skipped != int64(len(l.events))) {
					t.Errorf("rerun: %+v, want every event skipped", res)
				}
				check(when)
			}
		})
	}
}

// TestUniqueValueMovesRandom: random legal transactions on tables with a
// unique key besides the primary key — rows inserted, deleted, moved to
// another key (and their old key taken by a new row), unique values moved,
// chained, swapped and set to NULL — each transaction's row changes in a
// random order, applied with random batch, statement and worker sizes,
// with or without foreign-key checks, with a DDL now and then (one of them
// adding a table's unique key); the downstream must hold what the log says, and
// a rerun must change nothing.
func TestUniqueValueMovesRandom(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 27))
			s := newServer(t)
			l := &log27{schema: s.schema}
			m := model27{}
			l.ddl(10, "", codec.ActionCreateSchema, "CREATE DATABASE "+s.schema)
			l.ddl(11, "r", codec.ActionCreateTable, "CREATE TABLE r (id INT PRIMARY KEY, u INT, v VARCHAR(20), UNIQUE KEY uu (u))")
			l.ddl(12, "rci", codec.ActionCreateTable, "CREATE TABLE rci (id VARCHAR(20) PRIMARY KEY, u INT, v VARCHAR(20), UNIQUE KEY uu (u))")
			// Its unique key comes with a DDL, after the sink has written
			// to it.
			l.ddl(13, "late", codec.ActionCreateTable, "CREATE TABLE late (id INT PRIMARY KEY, u INT, v VARCHAR(20))")
			type row struct {
				id int64
				u  int64 // 0: NULL
			}
			image := func(table string, r row, ts uint64) []codec.Column {
				id := pkInt("id", r.id)
				if table == "rci" {
					id = pkStr("id", fmt.Sprint("R", r.id))
					id.Collation = "utf8mb4_general_ci" // the batch is not reduced by key
				}
				u := intCol("u", r.u)
				if r.u == 0 {
					u = codec.Column{Name: "u", Type: codec.TypeLonglong, Flags: codec.FlagNullable}
				}
				return cols(id, u, strCol("v", fmt.Sprint("at ", ts)))
			}
			ts := uint64(100)
			tables := []string{"r", "rci", "late"}
			for _, table := range tables {
				live := map[int64]row{} // id → row
				imgs := map[int64][]codec.Column{}
				nextID, nextU := int64(1), int64(1)
				for i := range 150 {
					ts++
					if table == "late" && i == 75 {
						l.ddl(ts, table, codec.ActionAddIndex, "ALTER TABLE late ADD UNIQUE KEY uu (u)")
						ts++
					}
					if rng.IntN(40) == 0 {
						l.ddl(ts, table, codec.ActionAddIndex, fmt.Sprintf("CREATE INDEX i%d ON %s (v)", ts, table))
						ts++
					}
					// The rows the transaction changes, each once.
					ids := make([]int64, 0, len(live))
					for id := range live {
						ids = append(ids, id)
					}
					slices.Sort(ids)
					rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
					ids = ids[:min(len(ids), rng.IntN(7))]
					// Unique values the transaction frees, and new ones.
					var pool []int64
					for _, id := range ids {
						if u := live[id].u; u != 0 {
							pool = append(pool, u)
						}
					}
					for range 1 + rng.IntN(3) {
						pool = append(pool, nextU)
						nextU++
					}
					rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
					take := func() int64 {
						if len(pool) == 0 || rng.IntN(8) == 0 {
							return 0
						}
						u := pool[0]
						pool = pool[1:]
						return u
					}
					type change struct{ pre, post []codec.Column }
					var changes []change
					var freedIDs []int64
					for _, id := range ids {
						old := live[id]
						switch rng.IntN(5) {
						case 0: // delete
							changes = append(changes, change{imgs[id], nil})
							delete(live, id)
							delete(imgs, id)
							freedIDs = append(freedIDs, id)
						case 1: // a new key
							r := row{nextID, take()}
							nextID++
							img := image(table, r, ts)
							changes = append(changes, change{imgs[id], img})
							delete(live, id)
							delete(imgs, id)
							live[r.id], imgs[r.id] = r, img
							freedIDs = append(freedIDs, id)
						default: // another unique value
							r := row{old.id, take()}
							img := image(table, r, ts)
							changes = append(changes, change{imgs[id], img})
							live[id], imgs[id] = r, img
						}
					}
					for range rng.IntN(4) { // inserts, some of a key the transaction freed
						id := nextID
						if len(freedIDs) > 0 && rng.IntN(2) == 0 {
							id, freedIDs = freedIDs[0], freedIDs[1:]
						} else {
							nextID++
						}
						r := row{id, take()}
						img := image(table, r, ts)
						changes = append(changes, change{nil, img})
						live[id], imgs[id] = r, img
					}
					rng.Shuffle(len(changes), func(i, j int) { changes[i], changes[j] = changes[j], changes[i] })
					// A key may be left and taken again in one transaction:
					// what the transaction leaves is every old image gone,
					// then every new one there.
					for _, c := range changes {
						l.row(ts, table, c.pre, c.post)
						m.apply(table, c.pre, nil)
					}
					for _, c := range changes {
						m.apply(table, nil, c.post)
					}
				}
			}
			for i, when := range []string{"run", "rerun"} {
				opts := apply.Options{BatchRows: 1 + rng.IntN(64), Workers: 1 + rng.IntN(3), TxnRows: 1 + rng.IntN(200)}
				sink, err := s.open(s.dsn, apply.SinkOptions{MaxStatementRows: 1 + rng.IntN(16), ForeignKeyChecks: rng.IntN(3) == 0})
				if err != nil {
					t.Fatal(err)
				}
				res, err := apply.Run(context.Background(), apply.SliceSource(l.events), sink, &opts)
				if err != nil {
					t.Fatalf("%s with %+v: %v", when, opts, err)
				}
				if i == 1 && res.Skipped != int64(len(l.events)) {
					t.Errorf("rerun: %+v, want every event skipped", res)
				}
				for _, table := range tables {
					if got, want := s.dump27(table), m.dump(table); !slices.Equal(got, want) {
						t.Errorf("%s with %+v: %s holds\n%q, want\n%q", when, opts, table, got, want)
					}
				}
			}
		})
	}
}

// TestUniqueValueMovesReferenced: the rows a unit deletes before writing
// them again are parents of rows of another table with ON DELETE CASCADE.
// With the foreign-key triggers off (the default) the delete cascades
// nowhere: the swap applies and the children stay. With ForeignKeyChecks it
// would cascade, so the sink writes that table as is, and the swap fails
// loudly, naming the table, with nothing of its transaction left.
func TestUniqueValueMovesReferenced(t *testing.T) {
	for _, fk := range []bool{false, true} {
		t.Run(fmt.Sprint("foreign-key checks ", fk), func(t *testing.T) {
			s := newServer(t)
			l := &log27{schema: s.schema}
			l.ddl(10, "", codec.ActionCreateSchema, "CREATE DATABASE "+s.schema)
			l.ddl(11, "par", codec.ActionCreateTable, "CREATE TABLE par (id INT PRIMARY KEY, u INT, UNIQUE KEY uu (u))")
			l.ddl(12, "ch", codec.ActionCreateTable,
				"CREATE TABLE ch (id INT PRIMARY KEY, p INT, CONSTRAINT fp FOREIGN KEY (p) REFERENCES par (id) ON DELETE CASCADE)")
			par := func(id, u int64) []codec.Column { return cols(pkInt("id", id), intCol("u", u)) }
			l.row(20, "par", nil, par(1, 1))
			l.row(20, "par", nil, par(2, 2))
			l.row(21, "ch", nil, cols(pkInt("id", 1), intCol("p", 1)))
			l.row(21, "ch", nil, cols(pkInt("id", 2), intCol("p", 2)))
			l.ddl(30, "other", codec.ActionCreateTable, "CREATE TABLE other (id INT PRIMARY KEY)")
			l.row(40, "par", par(1, 1), par(1, 2))
			l.row(40, "par", par(2, 2), par(2, 1))
			sink, err := s.open(s.dsn, apply.SinkOptions{ForeignKeyChecks: fk})
			if err != nil {
				t.Fatal(err)
			}
			_, err = apply.Run(context.Background(), apply.SliceSource(l.events), sink, nil)
			wantPar := []string{"1|2", "2|1"}
			if fk {
				var se *apply.StatementError
				if !errors.As(err, &se) || se.Table.Name != "par" || !sqlState("23505")(err) {
					t.Fatalf("a unique swap in a referenced table with ForeignKeyChecks: %v, want a duplicate key error naming par", err)
				}
				wantPar = []string{"1|1", "2|2"}
			} else if err != nil {
				t.Fatal(err)
			}
			if got := s.dump27("par"); !slices.Equal(got, wantPar) {
				t.Errorf("par holds %q, want %q", got, wantPar)
			}
			if got, want := s.dump27("ch"), []string{"1|1", "2|2"}; !slices.Equal(got, want) {
				t.Errorf("ch holds %q, want %q", got, want)
			}
		})
	}
}

// oneConnSink opens a sink on a fresh schema with a pool of one connection,
// so that every statement meets what that connection prepared, and starts
// a log that creates the schema (at ts 10).
func oneConnSink(t *testing.T) (*server, *Sink, *log27) {
	t.Helper()
	s := newServer(t)
	sink, err := s.open(s.dsn, apply.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sink.DB().SetMaxOpenConns(1)
	l := &log27{schema: s.schema}
	l.ddl(10, "", codec.ActionCreateSchema, "CREATE DATABASE "+s.schema)
	return s, sink, l
}
