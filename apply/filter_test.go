package apply

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
)

// recSink is an in-memory Sink that records what reaches it: the table of
// every row applied and every DDL (schema and query).
type recSink struct {
	mu   sync.Mutex
	rows []Table
	ddls []codec.DDL
}

func (s *recSink) Progress(context.Context) (Progress, error) { return Progress{}, nil }
func (s *recSink) Begin(context.Context) (Tx, error)          { return &recTx{s: s}, nil }
func (s *recSink) Close() error                               { return nil }
func (s *recSink) ApplyDDL(_ context.Context, d *codec.DDL, _ DDLMark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *d
	c.Tables = slices.Clone(d.Tables)
	s.ddls = append(s.ddls, c)
	return nil
}

type recTx struct {
	s    *recSink
	rows []Table
}

func (t *recTx) ApplyRows(_ context.Context, table Table, rows []*codec.RowChange) error {
	for _, r := range rows {
		if TableOf(r.Table) != table {
			return errors.New("row of " + r.Table.String() + " applied as " + table.String())
		}
		t.rows = append(t.rows, table)
	}
	return nil
}

func (t *recTx) Commit(context.Context, []Mark) error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.s.rows = append(t.s.rows, t.rows...)
	return nil
}

func (t *recTx) Rollback() error { return nil }

func tname(schema, name string) codec.TableName { return codec.TableName{Schema: schema, Name: name} }

func rowAt(ts uint64, schema, name string) codec.Event {
	return codectest.Row(ts, tname(schema, name), codectest.Int("id", int64(ts), codec.FlagPrimaryKey|codec.FlagHandleKey))
}

func ddlAt(ts uint64, schema, name string, action codec.ActionType, q string) codec.Event {
	if name == "" {
		return codectest.DDL(ts, tname(schema, name), action, q)
	}
	return codectest.DDL(ts, tname(schema, name), action, q, codectest.Affected(tname(schema, name)))
}

// runFiltered runs events through FilterTables into a recSink.
func runFiltered(t *testing.T, events []codec.Event, include, exclude []string) (*recSink, error) {
	t.Helper()
	src, err := FilterTables(SliceSource(events), include, exclude)
	if err != nil {
		t.Fatal(err)
	}
	s := &recSink{}
	_, err = Run(context.Background(), src, s, &Options{Workers: 2, BatchRows: 1})
	return s, err
}

func queries(s *recSink) []string {
	var q []string
	for _, d := range s.ddls {
		q = append(q, d.Query)
	}
	return q
}

func TestFilterTables(t *testing.T) {
	events := []codec.Event{
		ddlAt(10, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE shop"),
		ddlAt(11, "crm", "", codec.ActionCreateSchema, "CREATE DATABASE crm"),
		ddlAt(12, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE orders (id BIGINT PRIMARY KEY)"),
		ddlAt(13, "shop", "items", codec.ActionCreateTable, "CREATE TABLE items (id BIGINT PRIMARY KEY)"),
		ddlAt(14, "crm", "users", codec.ActionCreateTable, "CREATE TABLE users (id BIGINT PRIMARY KEY)"),
		rowAt(20, "shop", "orders"), rowAt(20, "shop", "items"), rowAt(20, "crm", "users"),
		rowAt(21, "shop", "orders"), rowAt(21, "crm", "users"),
		// A rename inside the selection passes.
		ddlAt(22, "shop", "orders2", codec.ActionRenameTable, "RENAME TABLE `shop`.`orders` TO `shop`.`orders2`"),
		rowAt(23, "shop", "orders2"),
		// A rename among unselected tables is dropped.
		ddlAt(24, "crm", "people", codec.ActionRenameTable, "ALTER TABLE users RENAME TO people"),
		ddlAt(25, "shop", "items", codec.ActionDropTable, "DROP TABLE items"),
	}
	s, err := runFiltered(t, events, []string{"shop.*"}, []string{"*.items"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CREATE DATABASE shop", "CREATE TABLE orders (id BIGINT PRIMARY KEY)", "RENAME TABLE `shop`.`orders` TO `shop`.`orders2`"}
	if got := queries(s); !slices.Equal(got, want) {
		t.Errorf("DDLs %q, want %q", got, want)
	}
	slices.SortFunc(s.rows, func(a, b Table) int { return strings.Compare(a.String(), b.String()) })
	if want := []Table{{"shop", "orders"}, {"shop", "orders"}, {"shop", "orders2"}}; !slices.Equal(s.rows, want) {
		t.Errorf("rows %v, want %v", s.rows, want)
	}

	// No include list: every schema-level DDL passes, unless an exclude
	// pattern excludes the whole schema.
	s, err = runFiltered(t, events, nil, []string{"crm.*"})
	if err != nil {
		t.Fatal(err)
	}
	if got := queries(s); slices.Contains(got, "CREATE DATABASE crm") || !slices.Contains(got, "CREATE DATABASE shop") || !slices.Contains(got, "DROP TABLE items") {
		t.Errorf("exclude crm.*: DDLs %q", got)
	}
}

func TestFilterBoundary(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   codec.Event
		want []string
	}{
		{"rename out", ddlAt(30, "archive", "orders", codec.ActionRenameTable, "RENAME TABLE shop.orders TO archive.orders"),
			[]string{"commit ts 30", "RENAME TABLE shop.orders TO archive.orders", "shop.orders (selected)", "archive.orders (not selected)"}},
		{"rename in", ddlAt(30, "shop", "orders", codec.ActionRenameTable, "RENAME TABLE /* x */ `archive` . `old` TO orders"),
			[]string{"commit ts 30", "archive.old (not selected)", "shop.orders (selected)"}},
		{"rename tables", ddlAt(30, "shop", "a2", codec.ActionRenameTables, "RENAME TABLE a TO a2, crm.b TO crm.b2"),
			[]string{"crm.b", "shop.a2", "touches selected tables"}},
		{"alter rename", ddlAt(30, "crm", "o", codec.ActionRenameTable, "ALTER TABLE shop.orders ADD COLUMN c INT, RENAME AS crm.o"),
			[]string{"shop.orders (selected) to crm.o (not selected)"}},
		{"drop two", codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{CommitTs: 30, Table: tname("shop", "a"), Type: codec.ActionDropTable,
			Query: "DROP TABLE shop.a, crm.b", Tables: []codec.DDLTable{{TableName: tname("shop", "a"), Role: codec.RoleDropped}, {TableName: tname("crm", "b"), Role: codec.RoleDropped}}}},
			[]string{"commit ts 30", "DROP TABLE shop.a, crm.b", "[shop.a]", "[crm.b]"}},
		{"unreadable rename", ddlAt(30, "shop", "x", codec.ActionRenameTable, "RENAME shop.y"),
			[]string{"commit ts 30", "RENAME shop.y", "does not name the tables"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			events := []codec.Event{rowAt(20, "shop", "orders"), c.ev, rowAt(40, "shop", "orders")}
			s, err := runFiltered(t, events, []string{"shop.*"}, nil)
			if err == nil {
				t.Fatalf("no error; DDLs %q", queries(s))
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			if c.name != "unreadable rename" && !errors.Is(err, ErrFilterBoundary) {
				t.Errorf("error %v does not wrap ErrFilterBoundary", err)
			}
			// The apply stopped before the DDL (a source error rolls
			// back what was not committed yet): nothing after it is in.
			if len(s.ddls) != 0 || len(s.rows) > 1 {
				t.Errorf("applied DDLs %q, rows %v", queries(s), s.rows)
			}
		})
	}
}

func TestFilterPatterns(t *testing.T) {
	for _, p := range []string{"orders", "shop.", ".orders", "shop.[a-", "[.x"} {
		if err := CheckTablePattern(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("CheckTablePattern(%q) = %v, want an error naming it", p, err)
		}
		if _, err := FilterTables(SliceSource(nil), nil, []string{p}); err == nil || !strings.Contains(err.Error(), "exclude") {
			t.Errorf("FilterTables exclude %q = %v", p, err)
		}
	}
	f := &tableFilter{}
	for _, p := range []string{"shop.*", "*.orders", "sh?p.item[0-9]"} {
		tp, err := parseTablePattern(p)
		if err != nil {
			t.Fatal(err)
		}
		f.include = append(f.include, tp)
	}
	for tb, want := range map[Table]bool{
		{"shop", "x"}: true, {"crm", "orders"}: true, {"shap", "item7"}: true, {"shap", "item"}: false,
		{"crm", "Orders"}: false, {"shop", "a.b"}: true, {"shops", "x"}: false,
	} {
		if got := f.selects(tb); got != want {
			t.Errorf("selects(%s) = %v", tb, got)
		}
	}
}

func TestMapSchemaQuery(t *testing.T) {
	m := &schemaMap{from: map[string]string{"shop": "replica"}, targets: map[string]string{"replica": "shop"}}
	for in, want := range map[string]string{
		"CREATE TABLE orders (id INT)":                                         "CREATE TABLE orders (id INT)",
		"CREATE TABLE shop.orders (id INT)":                                    "CREATE TABLE `replica`.orders (id INT)",
		"CREATE TABLE `shop`.`orders` LIKE `Shop`.`t`":                         "CREATE TABLE `replica`.`orders` LIKE `replica`.`t`",
		"RENAME TABLE shop . a TO other.a, x.shop TO shop.y":                   "RENAME TABLE `replica` . a TO other.a, x.shop TO `replica`.y",
		"ALTER TABLE shop.shop ADD COLUMN c INT COMMENT 'shop.orders'":         "ALTER TABLE `replica`.shop ADD COLUMN c INT COMMENT 'shop.orders'",
		"ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES shop.p(id)": "ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES `replica`.p(id)",
		"CREATE DATABASE IF NOT EXISTS `shop`":                                 "CREATE DATABASE IF NOT EXISTS `replica`",
		"DROP SCHEMA shop":                                                     "DROP SCHEMA `replica`",
		"CREATE TABLE shopx.a (shop INT) /* shop.a */ -- shop.b\n":             "CREATE TABLE shopx.a (shop INT) /* shop.a */ -- shop.b\n",
		// Comments are kept as written where a name is mapped.
		"CREATE TABLE shop.a (id INT /*T![auto_rand] AUTO_RANDOM */) # shop.b\n": "CREATE TABLE `replica`.a (id INT /*T![auto_rand] AUTO_RANDOM */) # shop.b\n",
		"CREATE VIEW v AS SELECT o.id FROM shop.orders o":                        "CREATE VIEW v AS SELECT o.id FROM `replica`.orders o",
	} {
		d := &codec.DDL{CommitTs: 5, Table: tname("shop", "t"), Query: in}
		got, _, err := m.query(d)
		if err != nil || got != want {
			t.Errorf("query(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{
		"CREATE VIEW v AS SELECT shop.id FROM shop.orders JOIN shop",
		`CREATE TABLE "shop"."t" (id INT)`,
		"CREATE TABLE shop.t (c VARCHAR(3) DEFAULT 'x",
	} {
		d := &codec.DDL{CommitTs: 5, Table: tname("shop", "t"), Query: in}
		if _, _, err := m.query(d); !errors.Is(err, ErrSchemaMap) || !strings.Contains(err.Error(), "commit ts 5") {
			t.Errorf("query(%q): err = %v, want ErrSchemaMap naming the DDL", in, err)
		}
	}
}

// TestMapSchemas runs mapped events into a recording sink: rows and DDLs
// land in the mapped schema, and the source's events are left as they were.
func TestMapSchemas(t *testing.T) {
	events := []codec.Event{
		ddlAt(10, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE shop"),
		ddlAt(11, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY)"),
		ddlAt(12, "crm", "users", codec.ActionCreateTable, "CREATE TABLE users (id BIGINT PRIMARY KEY)"),
		rowAt(20, "shop", "orders"), rowAt(20, "crm", "users"), rowAt(21, "SHOP", "orders"),
	}
	orig := make([]codec.Event, len(events))
	for i := range events {
		orig[i] = *events[i].Clone()
	}
	src, err := MapSchemas(SliceSource(events), map[string]string{"shop": "replica"})
	if err != nil {
		t.Fatal(err)
	}
	s := &recSink{}
	if _, err := Run(context.Background(), src, s, &Options{Workers: 2, BatchRows: 1}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(events, orig) {
		t.Errorf("the source's events were modified")
	}
	var got []string
	for _, d := range s.ddls {
		var ts []string
		for _, t := range d.Tables {
			ts = append(ts, t.String())
		}
		got = append(got, d.Table.Schema+": "+d.Query+" "+strings.Join(ts, ","))
	}
	want := []string{
		"replica: CREATE DATABASE `replica` ",
		"replica: CREATE TABLE `replica`.orders (id BIGINT PRIMARY KEY) replica.orders",
		"crm: CREATE TABLE users (id BIGINT PRIMARY KEY) crm.users",
	}
	if !slices.Equal(got, want) {
		t.Errorf("DDLs\n%q, want\n%q", got, want)
	}
	slices.SortFunc(s.rows, func(a, b Table) int { return strings.Compare(a.String(), b.String()) })
	if want := []Table{{"crm", "users"}, {"replica", "orders"}, {"replica", "orders"}}; !slices.Equal(s.rows, want) {
		t.Errorf("rows %v, want %v", s.rows, want)
	}

	// A schema of the log that another is mapped onto: their tables would
	// mix, so it stops there.
	src, _ = MapSchemas(SliceSource(events), map[string]string{"shop": "crm"})
	if _, err := Run(context.Background(), src, &recSink{}, nil); !errors.Is(err, ErrSchemaMap) || !strings.Contains(err.Error(), `schema "crm"`) {
		t.Errorf("mapping onto a schema of the log: err = %v", err)
	}
	// A swap is fine.
	src, _ = MapSchemas(SliceSource(events), map[string]string{"shop": "crm", "crm": "shop"})
	if _, err := Run(context.Background(), src, &recSink{}, nil); err != nil {
		t.Errorf("swap: %v", err)
	}
}
