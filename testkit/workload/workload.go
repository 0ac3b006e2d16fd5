// Package workload generates a deterministic CDC workload — row changes and DDLs
// over several tables, one of them split into key-range spans — and keeps
// the model of the upstream database that the workload describes, so a
// replay can be checked against the state the upstream reached rather than
// against whatever the applier believes.
//
// Everything follows from Config (and its Seed): two Generators with the same
// Config produce identical transactions with identical timestamps, which is
// what lets a replacement writer "ask the upstream again" for the events of
// its spans after a failover, and what lets Expected rebuild the upstream
// state at any ts without keeping the workload in memory.
//
// The DDLs are the ones both MySQL and SQLite accept as written (CREATE
// TABLE, ALTER TABLE … ADD COLUMN, DROP TABLE) plus TRUNCATE TABLE, which a
// SQLite sink has to translate: the event carries ActionTruncateTable, so it
// can.
package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/redokit/redokit/codec"
)

// DDLSpan is the span every DDL is written on. Row spans are never 0.
const DDLSpan uint64 = 0

// DefaultStartTs is a TSO-shaped ts (physical milliseconds << 18) at
// 2025-01-01T00:00:00Z: the ts the default workload starts after, so that
// tools that print a TSO as a time show something sensible.
const DefaultStartTs = uint64(1735689600000) << 18

// Config describes a workload. Zero fields take the defaults noted.
type Config struct {
	Schema  string  // schema of every table; default "demo"
	Tables  int     // tables created at the start; default 4, at least 1
	Rows    int     // row changes in all; default 20,000
	RowSize int     // bytes of the text column of a row; default 200
	TxnRows int     // most row changes in one transaction; default 8
	DDLRate float64 // fraction of transactions that are DDLs; default 0.005; negative: none after the initial CREATEs
	// SplitSpans is how many key-range spans the first table is split into
	// (by id modulo SplitSpans); default 2, at least 1.
	SplitSpans int
	Seed       uint64
	// StartTs is the ts the workload starts after: the first event's commit
	// ts is above it. Default DefaultStartTs.
	StartTs uint64
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = "demo"
	}
	if c.Tables <= 0 {
		c.Tables = 4
	}
	if c.Rows <= 0 {
		c.Rows = 20000
	}
	if c.RowSize <= 0 {
		c.RowSize = 200
	}
	if c.TxnRows <= 0 {
		c.TxnRows = 8
	}
	if c.DDLRate == 0 {
		c.DDLRate = 0.005
	}
	if c.SplitSpans <= 0 {
		c.SplitSpans = 2
	}
	if c.StartTs == 0 {
		c.StartTs = DefaultStartTs
	}
	return c
}

// Normalize returns c with its defaults filled in.
func (c Config) Normalize() Config { return c.withDefaults() }

// Change is one event of a transaction and the span it belongs to.
type Change struct {
	Span  uint64
	Event codec.Event
}

// Txn is one upstream transaction: row changes at one commit ts, or a single
// DDL. Spans that a DDL creates start at its commit ts (their events come
// after it); spans it drops have no event at or after it.
type Txn struct {
	CommitTs uint64
	Changes  []Change // rows on their spans, or one DDL on DDLSpan
	DDL      bool
	// NewSpans start at CommitTs; DroppedSpans end before it.
	NewSpans     []uint64
	DroppedSpans []uint64
	// Creates reports a DDL that creates a table (CREATE, TRUNCATE): the
	// writer side holds the watermark at its ts until the new spans exist.
	Creates bool
}

// Rows counts the row changes of t.
func (t *Txn) Rows() int {
	if t.DDL {
		return 0
	}
	return len(t.Changes)
}

// ColumnDef is one column of a model table.
type ColumnDef struct {
	Name      string
	Type      codec.Type
	Flags     codec.ColumnFlag
	Charset   string
	Collation string
	SQL       string // the column's type as DDL writes it
}

// Table is one table of the model.
type Table struct {
	Name       string
	PhysicalID int64
	Split      bool // the table split into several spans
	Columns    []ColumnDef
	Rows       map[int64][]codec.Value // by id; values in Columns order
	nextID     int64
	added      int // columns added so far (for names)
}

// Spans returns the spans of t: one per key range of a split table.
func (t *Table) Spans(split int) []uint64 {
	if !t.Split {
		return []uint64{spanOf(t.PhysicalID, 0)}
	}
	out := make([]uint64, split)
	for k := range out {
		out[k] = spanOf(t.PhysicalID, k)
	}
	return out
}

func spanOf(physicalID int64, k int) uint64 { return uint64(physicalID)<<8 | uint64(k) }

// SpanTable returns the physical table ID of a row span and the key range
// index inside it.
func SpanTable(span uint64) (physicalID int64, part int) {
	return int64(span >> 8), int(span & 0xff)
}

// Model is the upstream database as the workload leaves it.
type Model struct {
	Schema string
	Tables map[string]*Table // by name
	Ts     uint64            // commit ts of the last transaction applied
}

// Generator produces the transactions of a workload, in commit-ts order.
type Generator struct {
	cfg        Config
	rng        *rand.Rand
	m          *Model
	ts         uint64
	rowsLeft   int
	initLeft   int  // initial CREATE TABLEs still to emit
	schemaDone bool // the initial CREATE DATABASE is emitted
	nextPhys   int64
	nextTable  int
	split      string // name of the split table
	done       bool
	// The next transaction's timestamps, drawn ahead by PeekTs (or Next):
	// they are always the first draw of a transaction, so peeking does not
	// change what is generated.
	pending               bool
	pendCommit, pendStart uint64
}

// New returns a Generator for cfg.
func New(cfg Config) *Generator {
	cfg = cfg.withDefaults()
	return &Generator{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		m:        &Model{Schema: cfg.Schema, Tables: map[string]*Table{}, Ts: cfg.StartTs},
		ts:       cfg.StartTs,
		rowsLeft: cfg.Rows,
		initLeft: cfg.Tables,
		nextPhys: 100,
	}
}

// Config returns the generator's configuration, defaults filled in.
func (g *Generator) Config() Config { return g.cfg }

// Model returns the model after the transactions generated so far. It is
// the generator's own and changes with the next call of Next.
func (g *Generator) Model() *Model { return g.m }

// Spans returns every row span that exists now, sorted.
func (g *Generator) Spans() []uint64 {
	var out []uint64
	for _, t := range g.m.Tables {
		out = append(out, t.Spans(g.cfg.SplitSpans)...)
	}
	slices.Sort(out)
	return out
}

// PeekTs returns the commit ts of the next transaction without generating
// it, or false when the workload is done.
func (g *Generator) PeekTs() (uint64, bool) {
	if g.done || (g.schemaDone && g.initLeft == 0 && g.rowsLeft <= 0) {
		return 0, false
	}
	if !g.pending {
		g.ts = (g.ts>>18+1+g.rng.Uint64N(20))<<18 | g.rng.Uint64N(1<<10)
		g.pendCommit, g.pendStart = g.ts, g.ts-(1+g.rng.Uint64N(5))<<18
		g.pending = true
	}
	return g.pendCommit, true
}

// Next returns the next transaction, or false when the workload is done.
// The Txn and its events are the caller's.
func (g *Generator) Next() (*Txn, bool) {
	if _, ok := g.PeekTs(); !ok {
		g.done = true
		return nil, false
	}
	if !g.schemaDone {
		// A log starts with its schema, so a downstream that does not have
		// it yet (MySQL) gets it; SQLite has one namespace and skips it.
		g.schemaDone = true
		commit, start := g.tick()
		ev := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
			StartTs: start, CommitTs: commit, Table: codec.TableName{Schema: g.cfg.Schema},
			Type: codec.ActionCreateSchema, Query: fmt.Sprintf("CREATE DATABASE IF NOT EXISTS `%s`", g.cfg.Schema),
		}}
		return &Txn{CommitTs: commit, DDL: true, Changes: []Change{{Span: DDLSpan, Event: ev}}}, true
	}
	if g.initLeft > 0 {
		g.initLeft--
		return g.createTable(), true
	}
	if g.cfg.DDLRate > 0 && g.rng.Float64() < g.cfg.DDLRate {
		if t := g.randomDDL(); t != nil {
			return t, true
		}
	}
	return g.rowTxn(), true
}

// tick takes the pending timestamps of the transaction being generated
// (PeekTs drew them: a TSO-like clock, 1 to 20 ms of physical time and a
// random logical part; the start ts a few ms before the commit ts).
func (g *Generator) tick() (commit, start uint64) {
	g.PeekTs()
	g.pending = false
	g.m.Ts = g.pendCommit
	return g.pendCommit, g.pendStart
}

var baseColumns = []ColumnDef{
	{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, SQL: "BIGINT NOT NULL"},
	{Name: "k", Type: codec.TypeLong, SQL: "INT NOT NULL"},
	{Name: "name", Type: codec.TypeVarchar, Charset: "utf8mb4", Collation: "utf8mb4_bin", SQL: "VARCHAR(64) NOT NULL"},
	{Name: "note", Type: codec.TypeBlob, Flags: codec.FlagNullable, Charset: "utf8mb4", Collation: "utf8mb4_bin", SQL: "TEXT"},
}

func (g *Generator) tableName(t *Table) codec.TableName {
	return codec.TableName{Schema: g.cfg.Schema, Name: t.Name, PhysicalID: t.PhysicalID}
}

func (g *Generator) newPhysicalID() int64 {
	g.nextPhys++
	return g.nextPhys
}

func createSQL(t *Table) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "CREATE TABLE `%s` (", t.Name)
	for _, c := range t.Columns {
		fmt.Fprintf(&sb, "`%s` %s, ", c.Name, c.SQL)
	}
	sb.WriteString("PRIMARY KEY (`id`))")
	return sb.String()
}

func (g *Generator) ddl(t *Table, action codec.ActionType, query string, tables ...codec.DDLTable) *Txn {
	commit, start := g.tick()
	ev := codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{
		StartTs: start, CommitTs: commit, Table: g.tableName(t), Type: action, Query: query, Tables: tables,
	}}
	return &Txn{CommitTs: commit, DDL: true, Changes: []Change{{Span: DDLSpan, Event: ev}}}
}

func (g *Generator) createTable() *Txn {
	g.nextTable++
	t := &Table{
		Name:       fmt.Sprintf("t%d", g.nextTable),
		PhysicalID: g.newPhysicalID(),
		Columns:    slices.Clone(baseColumns),
		Rows:       map[int64][]codec.Value{},
		nextID:     1,
	}
	if g.split == "" {
		t.Split = true
		g.split = t.Name
	}
	g.m.Tables[t.Name] = t
	tx := g.ddl(t, codec.ActionCreateTable, createSQL(t), codec.DDLTable{TableName: g.tableName(t), Role: codec.RoleCreated})
	tx.NewSpans = t.Spans(g.cfg.SplitSpans)
	tx.Creates = true
	return tx
}

// randomDDL picks add column (50%), truncate (15%), create (20%) or drop
// (15%; never the split table, and never the last two tables). Truncates
// and drops are kept rarer so that tables keep rows to compare.
func (g *Generator) randomDDL() *Txn {
	names := g.sortedTables()
	p := g.rng.IntN(20)
	switch {
	case p < 10:
		t := g.m.Tables[names[g.rng.IntN(len(names))]]
		t.added++
		c := ColumnDef{Name: fmt.Sprintf("c%d", t.added), Type: codec.TypeLonglong, Flags: codec.FlagNullable, SQL: "BIGINT"}
		if t.added%2 == 0 {
			c = ColumnDef{Name: c.Name, Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Collation: "utf8mb4_bin", SQL: "VARCHAR(32)"}
		}
		t.Columns = append(t.Columns, c)
		for id, row := range t.Rows {
			t.Rows[id] = append(row, codec.Null())
		}
		return g.ddl(t, codec.ActionAddColumn, fmt.Sprintf("ALTER TABLE `%s` ADD COLUMN `%s` %s", t.Name, c.Name, c.SQL),
			codec.DDLTable{TableName: g.tableName(t), Role: codec.RoleAffected})
	case p < 13:
		t := g.m.Tables[names[g.rng.IntN(len(names))]]
		old := g.tableName(t)
		oldSpans := t.Spans(g.cfg.SplitSpans)
		t.PhysicalID = g.newPhysicalID()
		clear(t.Rows)
		// The DDL names the table by its new ID, as every DDL names a table
		// as it is after the statement (docs/FORMAT.md, DDL body): the old
		// ID is in Tables, dropped.
		tx := g.ddl(t, codec.ActionTruncateTable, fmt.Sprintf("TRUNCATE TABLE `%s`", t.Name),
			codec.DDLTable{TableName: old, Role: codec.RoleDropped},
			codec.DDLTable{TableName: g.tableName(t), Role: codec.RoleCreated})
		tx.DroppedSpans = oldSpans
		tx.NewSpans = t.Spans(g.cfg.SplitSpans)
		tx.Creates = true
		return tx
	case p < 17:
		return g.createTable()
	default:
		var cands []string
		for _, n := range names {
			if n != g.split {
				cands = append(cands, n)
			}
		}
		if len(names) <= 2 || len(cands) == 0 {
			return nil
		}
		t := g.m.Tables[cands[g.rng.IntN(len(cands))]]
		delete(g.m.Tables, t.Name)
		tx := g.ddl(t, codec.ActionDropTable, fmt.Sprintf("DROP TABLE `%s`", t.Name),
			codec.DDLTable{TableName: g.tableName(t), Role: codec.RoleDropped})
		tx.DroppedSpans = t.Spans(g.cfg.SplitSpans)
		return tx
	}
}

func (g *Generator) sortedTables() []string {
	names := make([]string, 0, len(g.m.Tables))
	for n := range g.m.Tables {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// words make the text columns compress the way real text does: repeats, but
// not one byte repeated.
var words = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima
mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu order
invoice customer shipped pending paid refund warehouse parcel express standard priority account`)

func (g *Generator) text(n int) string {
	var sb strings.Builder
	for sb.Len() < n {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(words[g.rng.IntN(len(words))])
		if g.rng.IntN(4) == 0 {
			fmt.Fprintf(&sb, "-%d", g.rng.IntN(10000))
		}
	}
	s := sb.String()
	return s[:n]
}

func (g *Generator) value(c ColumnDef, id int64) codec.Value {
	switch c.Name {
	case "id":
		return codec.IntValue(id)
	case "k":
		return codec.IntValue(int64(g.rng.IntN(1_000_000)))
	case "name":
		return codec.StringValue(fmt.Sprintf("%s-%d", words[g.rng.IntN(len(words))], g.rng.IntN(100000)))
	case "note":
		if g.rng.IntN(20) == 0 {
			return codec.Null()
		}
		return codec.StringValue(g.text(g.cfg.RowSize))
	}
	if g.rng.IntN(5) == 0 {
		return codec.Null()
	}
	if c.Type == codec.TypeVarchar {
		return codec.StringValue(g.text(1 + g.rng.IntN(32)))
	}
	return codec.IntValue(g.rng.Int64N(1<<40) - 1<<39)
}

func columns(t *Table, vals []codec.Value) []codec.Column {
	out := make([]codec.Column, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = codec.Column{Name: c.Name, Type: c.Type, Flags: c.Flags, Charset: c.Charset, Collation: c.Collation, Value: vals[i]}
	}
	return out
}

// spanOfRow is the span of row id in t.
func (g *Generator) spanOfRow(t *Table, id int64) uint64 {
	if !t.Split {
		return spanOf(t.PhysicalID, 0)
	}
	return spanOf(t.PhysicalID, int(id%int64(g.cfg.SplitSpans)))
}

// rowTxn makes 1..TxnRows row changes, each on a different row: inserts
// (60%), updates (25%) and deletes (15%, and updates, only of existing rows).
func (g *Generator) rowTxn() *Txn {
	commit, start := g.tick()
	n := min(1+g.rng.IntN(g.cfg.TxnRows), g.rowsLeft)
	g.rowsLeft -= n
	names := g.sortedTables()
	tx := &Txn{CommitTs: commit}
	touched := map[string]map[int64]bool{}
	for range n {
		t := g.m.Tables[names[g.rng.IntN(len(names))]]
		if touched[t.Name] == nil {
			touched[t.Name] = map[int64]bool{}
		}
		rc := codec.RowChange{StartTs: start, CommitTs: commit, Table: g.tableName(t)}
		p := g.rng.IntN(100)
		id, ok := int64(0), false
		if p >= 60 && len(t.Rows) > 0 {
			id, ok = g.existingRow(t, touched[t.Name])
		}
		switch {
		case !ok:
			id = t.nextID
			t.nextID++
			vals := make([]codec.Value, len(t.Columns))
			for i, c := range t.Columns {
				vals[i] = g.value(c, id)
			}
			t.Rows[id] = vals
			rc.Columns = columns(t, vals)
		case p < 85:
			old := t.Rows[id]
			vals := slices.Clone(old)
			for i, c := range t.Columns {
				if c.Name != "id" && g.rng.IntN(2) == 0 {
					vals[i] = g.value(c, id)
				}
			}
			t.Rows[id] = vals
			rc.PreColumns = columns(t, old)
			rc.Columns = columns(t, vals)
		default:
			rc.PreColumns = columns(t, t.Rows[id])
			delete(t.Rows, id)
		}
		touched[t.Name][id] = true
		tx.Changes = append(tx.Changes, Change{Span: g.spanOfRow(t, id), Event: codec.Event{Kind: codec.RowEvent, Row: rc}})
	}
	return tx
}

// existingRow picks a row of t not touched yet by this transaction: a few
// random probes over the id range, which stays dense enough for that.
func (g *Generator) existingRow(t *Table, touched map[int64]bool) (int64, bool) {
	for range 8 {
		id := 1 + g.rng.Int64N(t.nextID-1)
		if _, ok := t.Rows[id]; ok && !touched[id] {
			return id, true
		}
	}
	return 0, false
}

// Expected replays cfg's workload through the transactions at commit ts ≤
// ts, and returns the model of the upstream at ts: what a downstream that
// applied the log through ts must hold.
func Expected(cfg Config, ts uint64) *Model {
	g := New(cfg)
	g.SkipTo(ts)
	return g.m
}

// SkipTo generates (into the model only) every transaction at commit ts ≤
// ts, and reports how many it generated.
func (g *Generator) SkipTo(ts uint64) int {
	n := 0
	for {
		next, ok := g.PeekTs()
		if !ok || next > ts {
			return n
		}
		g.Next()
		n++
	}
}
