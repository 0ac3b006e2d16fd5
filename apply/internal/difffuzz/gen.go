package difffuzz

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
)

// StepKind is what one step of a history does.
type StepKind uint8

// The steps. A step is interpreted against the model as it stands when
// the step comes, so that any subset of a history's steps is a legal
// history too: a step that finds nothing to act on (no table, no row, no
// column it may drop) does nothing. That is what lets the shrinker drop
// steps freely.
const (
	StepCreate StepKind = iota
	StepTxn
	StepBigTxn
	StepAddColumn
	StepDropColumn
	StepModifyColumn
	StepRenameColumn
	StepAddIndex
	StepDropIndex
	StepRenameTable
	StepTruncate
	StepDropTable
	StepRecreate
	StepMultiAlter
	// StepCheckpoint and StepAhead mark a replay over a downstream that
	// ran ahead: the downstream (its own sink) applied the log up to
	// StepAhead, the replay starts after StepCheckpoint. No DDL is
	// generated from StepCheckpoint on: a downstream that ran past a DDL
	// meets the DDL's rows in their old shape, which the apply documents
	// as no case it serves.
	StepCheckpoint
	StepAhead
)

var stepNames = [...]string{"create", "txn", "big-txn", "add-column", "drop-column", "modify-column", "rename-column",
	"add-index", "drop-index", "rename-table", "truncate", "drop-table", "recreate", "multi-alter", "checkpoint", "ahead"}

func (k StepKind) String() string { return stepNames[k] }

// Step is one step: its kind, and the seed of the choices it makes.
type Step struct {
	Kind StepKind
	Seed uint64
}

// History is a generated history: its steps and how it is applied.
type History struct {
	Seed  uint64
	Steps []Step
	// NUL lets text values hold a NUL byte (PostgreSQL refuses them).
	NUL bool
	// The apply's options.
	Workers, BatchRows, TxnRows int
	// SplitBytes, when not 0, is small enough that Run hands out the
	// commit ts of the history's transactions in parts
	// (apply.CommitTsSplitter).
	SplitBytes int64
	// NoTypeChange leaves out column type changes (MODIFY and CHANGE
	// COLUMN), which SQLite refuses.
	NoTypeChange bool
	// FK applies with the foreign-key checks on
	// (apply.SinkOptions.ForeignKeyChecks): every transaction then keeps
	// each tree's parents there, as an upstream checking its keys does.
	FK bool
}

// Generate makes the history of seed.
func Generate(seed uint64) *History {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	h := &History{Seed: seed, NUL: r.IntN(25) == 0, FK: r.IntN(5) == 0}
	switch r.IntN(3) {
	case 0:
		h.Workers, h.BatchRows, h.TxnRows = 1, 1, 1
	case 1:
		h.Workers, h.BatchRows, h.TxnRows = 0, 0, 0 // Run's defaults
	default:
		h.Workers, h.BatchRows, h.TxnRows = 1+r.IntN(4), 1+r.IntN(20), 1+r.IntN(60)
	}
	// From a stream of its own, so that every seed's history stays the
	// one it was before this option was drawn.
	if sr := rand.New(rand.NewPCG(seed, 0xb0f)); sr.IntN(3) == 0 {
		h.SplitBytes = 1 + sr.Int64N(16<<10)
	}
	for range 1 + r.IntN(3) {
		h.Steps = append(h.Steps, Step{StepCreate, r.Uint64()})
	}
	n := 8 + r.IntN(30)
	for range n {
		var k StepKind
		switch p := r.IntN(100); {
		case p < 50:
			k = StepTxn
		case p < 52:
			k = StepBigTxn
		case p < 56:
			k = StepCreate
		case p < 62:
			k = StepAddColumn
		case p < 67:
			k = StepDropColumn
		case p < 73:
			k = StepModifyColumn
		case p < 77:
			k = StepRenameColumn
		case p < 83:
			k = StepAddIndex
		case p < 87:
			k = StepDropIndex
		case p < 90:
			k = StepRenameTable
		case p < 93:
			k = StepTruncate
		case p < 95:
			k = StepDropTable
		case p < 97:
			k = StepRecreate
		default:
			k = StepMultiAlter
		}
		h.Steps = append(h.Steps, Step{k, r.Uint64()})
	}
	if r.IntN(4) == 0 && !h.FK {
		// A downstream that ran ahead (with the foreign-key checks on
		// a stale row stops the replay, documented: not generated): a checkpoint, some transactions
		// the downstream applied, and some it did not.
		h.Steps = append(h.Steps, Step{StepCheckpoint, 0})
		for range 2 + r.IntN(6) {
			h.Steps = append(h.Steps, Step{StepTxn, r.Uint64()})
		}
		h.Steps = append(h.Steps, Step{StepAhead, 0})
		for range r.IntN(4) {
			h.Steps = append(h.Steps, Step{StepTxn, r.Uint64()})
		}
	}
	return h
}

// Built is a history made into events, with the model's end state.
type Built struct {
	Events []codec.Event
	Tables map[string]*Table // by name, at the end
	// CheckpointTs and AheadTs are the ran-ahead marks' commit ts (0
	// when the history has none): the downstream holds the log up to
	// AheadTs, the replay starts above CheckpointTs.
	CheckpointTs, AheadTs uint64
	// NUL names the tables a row change wrote text with a NUL byte into.
	NUL map[string]bool
	// Keyless names the tables that had no key at some point in the
	// ran-ahead replay.
	Keyless map[string]bool
	// Trees names the tables of a foreign key (trees and their children),
	// under every name they had.
	Trees map[string]bool
}

type builder struct {
	schema   string
	h        *History
	tables   map[string]*Table
	ts       uint64
	evs      []codec.Event
	ids      int64
	names    int
	seq      int
	ckpt     bool
	out      *Built
	distinct map[string]map[string]bool // images of keyless tables written so far, in a ran-ahead history
	frozen   map[string]bool            // tables no transaction changes
}

// Build interprets the history's steps into events (under schema) and the
// model's end state.
func (h *History) Build(schema string) *Built {
	b := &builder{schema: schema, h: h, tables: map[string]*Table{}, ts: 100,
		out: &Built{NUL: map[string]bool{}, Keyless: map[string]bool{}, Trees: map[string]bool{}}, frozen: map[string]bool{}}
	if slices.ContainsFunc(h.Steps, func(s Step) bool { return s.Kind == StepCheckpoint }) {
		b.distinct = map[string]map[string]bool{}
	}
	for _, s := range h.Steps {
		r := rand.New(rand.NewPCG(s.Seed, uint64(s.Kind)))
		if b.ckpt && s.Kind != StepTxn && s.Kind != StepAhead && s.Kind != StepBigTxn ||
			h.NoTypeChange && s.Kind == StepModifyColumn {
			continue
		}
		b.step(r, s)
	}
	if b.out.AheadTs == 0 {
		b.out.CheckpointTs = 0
	}
	b.out.Events = b.evs
	b.out.Tables = b.tables
	return b.out
}

func (b *builder) names_() []string {
	var ns []string
	for n := range b.tables {
		ns = append(ns, n)
	}
	slices.Sort(ns)
	return ns
}

func (b *builder) pick(r *rand.Rand) *Table {
	ns := b.names_()
	if len(ns) == 0 {
		return nil
	}
	return b.tables[ns[r.IntN(len(ns))]]
}

func (b *builder) tn(t *Table) codec.TableName {
	return codec.TableName{Schema: b.schema, Name: t.Name, PhysicalID: t.ID}
}

// ddl adds a DDL event: at a new commit ts, or at the last one (after its
// rows, or beside another DDL).
func (b *builder) ddl(r *rand.Rand, t codec.TableName, action codec.ActionType, q string, roles ...codec.DDLTable) {
	if r.IntN(4) != 0 || len(b.evs) == 0 {
		b.ts++
	}
	if len(roles) == 0 {
		roles = []codec.DDLTable{codectest.Affected(t)}
	}
	b.evs = append(b.evs, codectest.DDL(b.ts, t, action, q, roles...))
}

func q(name string) string { return "`" + name + "`" }

func (b *builder) step(r *rand.Rand, s Step) {
	switch s.Kind {
	case StepCreate:
		if len(b.tables) >= 5 {
			return
		}
		b.names++
		b.create(r, fmt.Sprintf("t%d", b.names))
	case StepTxn:
		b.txn(r, false)
	case StepBigTxn:
		b.txn(r, true)
	case StepCheckpoint:
		b.ckpt = true
		b.out.CheckpointTs = b.ts
		for n, t := range b.tables {
			if t.key() != nil {
				continue
			}
			b.out.Keyless[n] = true
			// A replay cannot tell identical rows of a table without a
			// key apart (documented): from here on the rows of such a
			// table are all distinct, and a table already holding two
			// identical rows (a DROP COLUMN can make them) is left
			// alone.
			seen := map[string]bool{}
			for _, row := range t.Rows {
				k := rowKey(row)
				if seen[k] {
					b.frozen[n] = true
				}
				seen[k] = true
			}
			b.distinct[n] = seen
		}
	case StepAhead:
		if b.ckpt {
			b.ts++
			b.out.AheadTs = b.ts
		}
	default:
		t := b.pick(r)
		if t == nil {
			return
		}
		b.alter(r, s.Kind, t)
	}
}

func (b *builder) newCol(r *rand.Rand, name string, types []*colType, nullable bool) *Column {
	c := &Column{Name: name, T: types[r.IntN(len(types))], Nullable: nullable}
	if c.T.text && c.T.keyable && r.IntN(2) == 0 {
		c.Bin = true
	}
	return c
}

func (b *builder) colName() string {
	b.seq++
	return fmt.Sprintf("c%d", b.seq)
}

func (b *builder) idxName() string {
	b.seq++
	return fmt.Sprintf("ix%d", b.seq)
}

// create makes a table of a random shape and emits its CREATE TABLE.
func (b *builder) create(r *rand.Rand, name string) {
	b.ids++
	t := &Table{Name: name, ID: 1000 + b.ids}
	var trees []string
	for _, n := range b.names_() {
		if b.tables[n].Tree {
			trees = append(trees, n)
		}
	}
	switch k := r.IntN(11); {
	case k == 10 && len(trees) > 0:
		// A child of a tree: its pid references the tree's id.
		t.Ref = trees[r.IntN(len(trees))]
		t.Cols = append(t.Cols, b.newCol(r, "id", keyTypes, false), &Column{Name: "pid", T: tBigint, Nullable: true})
		t.Idx = append(t.Idx, &Index{Name: "PRIMARY", Cols: []string{"id"}, Unique: true}, &Index{Name: b.idxName(), Cols: []string{"pid"}})
	case k < 5:
		t.Cols = append(t.Cols, b.newCol(r, "id", keyTypes, false))
		t.Idx = append(t.Idx, &Index{Name: "PRIMARY", Cols: []string{"id"}, Unique: true})
	case k < 6:
		t.Cols = append(t.Cols, b.newCol(r, "k1", keyTypes, false), b.newCol(r, "k2", keyTypes, false))
		t.Idx = append(t.Idx, &Index{Name: "PRIMARY", Cols: []string{"k1", "k2"}, Unique: true})
	case k < 7:
		t.Cols = append(t.Cols, b.newCol(r, "u", keyTypes, false))
		t.Idx = append(t.Idx, &Index{Name: b.idxName(), Cols: []string{"u"}, Unique: true})
	case k < 9:
		// no key
	default:
		t.Tree = true
		t.Cols = append(t.Cols, &Column{Name: "id", T: tBigint}, &Column{Name: "parent", T: tBigint, Nullable: true})
		t.Idx = append(t.Idx, &Index{Name: "PRIMARY", Cols: []string{"id"}, Unique: true}, &Index{Name: b.idxName(), Cols: []string{"parent"}})
	}
	for range 1 + r.IntN(4) {
		t.Cols = append(t.Cols, b.newCol(r, b.colName(), allTypes, r.IntN(5) != 0))
	}
	b.randomIndex(r, t, func(...string) bool { return true })
	b.tables[name] = t
	if t.Tree || t.Ref != "" {
		b.out.Trees[name] = true
	}
	b.ddl(r, b.tn(t), codec.ActionCreateTable, t.createSQL(), codec.DDLTable{TableName: b.tn(t), Role: codec.RoleCreated})
}

// keyable returns the columns of t an index may take (no key column of a
// tree).
func (t *Table) keyable() []*Column {
	var out []*Column
	for _, c := range t.Cols {
		if c.T.keyable && !t.fixed(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// randomIndex adds an index on one or two keyable columns to t's
// definition (not as a DDL), if the rows allow it; it returns it, or nil.
func (b *builder) randomIndex(r *rand.Rand, t *Table, free func(...string) bool) *Index {
	var cs []*Column
	for _, c := range t.keyable() {
		if free(c.Name) {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	x := &Index{Name: b.idxName(), Unique: r.IntN(2) == 0}
	c := cs[r.IntN(len(cs))]
	x.Cols = []string{c.Name}
	if len(cs) > 1 && r.IntN(3) == 0 {
		d := cs[r.IntN(len(cs))]
		if d != c {
			x.Cols = append(x.Cols, d.Name)
		}
	}
	for _, y := range t.Idx {
		if slices.Equal(y.Cols, x.Cols) {
			return nil
		}
	}
	t.Idx = append(t.Idx, x)
	if x.Unique && !t.legal(t.Rows) {
		t.Idx = t.Idx[:len(t.Idx)-1]
		return nil
	}
	return x
}

// alter runs a DDL step on t.
func (b *builder) alter(r *rand.Rand, k StepKind, t *Table) {
	tn := b.tn(t)
	switch k {
	case StepAddColumn, StepDropColumn, StepModifyColumn, StepRenameColumn, StepAddIndex, StepDropIndex:
		cl, action, x := b.clause(r, k, t, map[string]bool{})
		switch {
		case cl == "":
		case k == StepAddIndex && r.IntN(2) == 0:
			u := ""
			if x.Unique {
				u = "UNIQUE "
			}
			b.ddl(r, tn, action, fmt.Sprintf("CREATE %sINDEX %s ON %s (`%s`)", u, q(x.Name), q(t.Name), strings.Join(x.Cols, "`, `")))
		case k == StepDropIndex && r.IntN(2) == 0:
			b.ddl(r, tn, action, fmt.Sprintf("DROP INDEX %s ON %s", q(x.Name), q(t.Name)))
		default:
			b.ddl(r, tn, action, fmt.Sprintf("ALTER TABLE %s %s", q(t.Name), cl))
		}
	case StepMultiAlter:
		// One ALTER TABLE of several clauses, on columns and indexes
		// no two of its clauses share (MySQL applies them together).
		busy := map[string]bool{}
		var cls []string
		for range 2 + r.IntN(3) {
			k := []StepKind{StepAddColumn, StepDropColumn, StepModifyColumn, StepRenameColumn, StepAddIndex, StepDropIndex}[r.IntN(6)]
			if k == StepModifyColumn && b.h.NoTypeChange {
				continue
			}
			if cl, _, _ := b.clause(r, k, t, busy); cl != "" {
				cls = append(cls, cl)
			}
		}
		if len(cls) > 0 {
			b.ddl(r, tn, codec.ActionMultiSchemaChange, fmt.Sprintf("ALTER TABLE %s %s", q(t.Name), strings.Join(cls, ", ")))
		}
	case StepRenameTable, StepTruncate, StepDropTable, StepRecreate:
		if b.referenced(t) {
			// MySQL refuses to drop or truncate a table a foreign key
			// of another references; a rename would carry the key
			// along on each side, untested here.
			return
		}
		b.whole(r, k, t)
	}
}

// referenced reports whether a child table's foreign key references t.
func (b *builder) referenced(t *Table) bool {
	for _, c := range b.tables {
		if c.Ref == t.Name {
			return true
		}
	}
	return false
}

// whole runs a DDL step on the table as a whole.
func (b *builder) whole(r *rand.Rand, k StepKind, t *Table) {
	tn := b.tn(t)
	switch k {
	case StepRenameTable:
		b.names++
		to := fmt.Sprintf("t%d", b.names)
		delete(b.tables, t.Name)
		from := t.Name
		t.Name = to
		b.tables[to] = t
		if t.Tree || t.Ref != "" {
			b.out.Trees[to] = true
		}
		if r.IntN(2) == 0 {
			b.ddl(r, tn, codec.ActionRenameTable, fmt.Sprintf("RENAME TABLE %s TO %s", q(from), q(to)))
		} else {
			b.ddl(r, tn, codec.ActionRenameTable, fmt.Sprintf("ALTER TABLE %s RENAME TO %s", q(from), q(to)))
		}
	case StepTruncate:
		t.Rows = nil
		b.ids++
		t.ID = 1000 + b.ids
		b.ddl(r, tn, codec.ActionTruncateTable, "TRUNCATE TABLE "+q(t.Name),
			codec.DDLTable{TableName: tn, Role: codec.RoleDropped}, codec.DDLTable{TableName: b.tn(t), Role: codec.RoleCreated})
	case StepDropTable:
		delete(b.tables, t.Name)
		b.ddl(r, tn, codec.ActionDropTable, "DROP TABLE "+q(t.Name), codec.DDLTable{TableName: tn, Role: codec.RoleDropped})
	case StepRecreate:
		delete(b.tables, t.Name)
		b.ddl(r, tn, codec.ActionDropTable, "DROP TABLE "+q(t.Name), codec.DDLTable{TableName: tn, Role: codec.RoleDropped})
		b.create(r, t.Name)
	}
}

func renameInIndexes(t *Table, from, to string) {
	for _, x := range t.Idx {
		for i, n := range x.Cols {
			if n == from {
				x.Cols[i] = to
			}
		}
	}
}

// defaults are the DEFAULTs an added column may take, as a DDL writes them
// and as the value MySQL fills the rows there with.
var defaults = map[*colType]struct {
	sql string
	v   codec.Value
}{
	tInt:     {"7", codec.IntValue(7)},
	tBigint:  {"-1", codec.IntValue(-1)},
	tVarchar: {"'d''ef'", codec.StringValue("d'ef")},
	tDec:     {"1.500", codec.DecimalValue("1.500")},
	tDate:    {"'2024-02-29'", codec.DateValue(codec.DateTime{Year: 2024, Month: 2, Day: 29})},
	tDouble:  {"0.25", codec.Float64Value(0.25)},
}

// clause applies one change of kind k to t's definition and rows and
// returns it as a clause of ALTER TABLE, with its action and the index it
// adds or drops; "" when t offers nothing for it. It leaves alone the
// columns in busy, and adds those it touches.
func (b *builder) clause(r *rand.Rand, k StepKind, t *Table, busy map[string]bool) (string, codec.ActionType, *Index) {
	free := func(cols ...string) bool {
		for _, c := range cols {
			if busy[c] {
				return false
			}
		}
		return true
	}
	mark := func(cols ...string) {
		for _, c := range cols {
			busy[c] = true
		}
	}
	switch k {
	case StepAddColumn:
		c := b.newCol(r, b.colName(), allTypes, true)
		fill, def := codec.Null(), ""
		if d, ok := defaults[c.T]; ok && r.IntN(2) == 0 {
			// A default: MySQL fills the rows there with it, and a
			// NOT NULL column may take it.
			fill, def = d.v, " DEFAULT "+d.sql
			c.Nullable = r.IntN(2) == 0
		}
		t.Cols = append(t.Cols, c)
		for i := range t.Rows {
			t.Rows[i] = append(t.Rows[i], fill)
		}
		mark(c.Name)
		return "ADD COLUMN " + c.colDef() + def, codec.ActionAddColumn, nil
	case StepDropColumn:
		if len(t.Cols) < 3 {
			return "", 0, nil
		}
		key := t.key()
		var cand []int
		for i, c := range t.Cols {
			_, multi := t.inIndex(c.Name)
			if multi || (key != nil && slices.Contains(key.Cols, c.Name)) || t.fixed(c.Name) || !free(c.Name) {
				continue
			}
			cand = append(cand, i)
		}
		if len(cand) == 0 {
			return "", 0, nil
		}
		i := cand[r.IntN(len(cand))]
		name := t.Cols[i].Name
		t.Idx = slices.DeleteFunc(t.Idx, func(x *Index) bool { return slices.Contains(x.Cols, name) })
		t.Cols = slices.Delete(t.Cols, i, i+1)
		for j := range t.Rows {
			t.Rows[j] = slices.Delete(t.Rows[j], i, i+1)
		}
		mark(name)
		return "DROP COLUMN " + q(name), codec.ActionDropColumn, nil
	case StepModifyColumn:
		type cand struct {
			i int
			w widening
		}
		var cs []cand
		for i, c := range t.Cols {
			if t.fixed(c.Name) || !free(c.Name) {
				continue
			}
			in, _ := t.inIndex(c.Name)
			for _, w := range widenings {
				if w.from == c.T && (!in || w.to.keyable) {
					cs = append(cs, cand{i, w})
				}
			}
		}
		if len(cs) == 0 {
			return "", 0, nil
		}
		ch := cs[r.IntN(len(cs))]
		c := t.Cols[ch.i]
		old := c.Name
		was := *c
		c.T = ch.w.to
		c.Bin = c.T.text && c.T.keyable && r.IntN(2) == 0
		rows := make([][]codec.Value, len(t.Rows))
		for j := range t.Rows {
			rows[j] = slices.Clone(t.Rows[j])
			if v := rows[j][ch.i]; !v.IsNull() {
				rows[j][ch.i] = ch.w.conv(v)
			}
		}
		if !t.legal(rows) {
			// A case-insensitive collation merges two unique values:
			// MySQL refuses the DDL.
			*c = was
			return "", 0, nil
		}
		t.Rows = rows
		mark(old)
		if r.IntN(3) == 0 {
			c.Name = b.colName()
			renameInIndexes(t, old, c.Name)
			mark(c.Name)
			return "CHANGE COLUMN " + q(old) + " " + c.colDef(), codec.ActionModifyColumn, nil
		}
		return "MODIFY COLUMN " + c.colDef(), codec.ActionModifyColumn, nil
	case StepRenameColumn:
		var cs []*Column
		for _, c := range t.Cols {
			if !t.fixed(c.Name) && free(c.Name) {
				cs = append(cs, c)
			}
		}
		if len(cs) == 0 {
			return "", 0, nil
		}
		c := cs[r.IntN(len(cs))]
		old := c.Name
		c.Name = b.colName()
		renameInIndexes(t, old, c.Name)
		mark(old, c.Name)
		return "RENAME COLUMN " + q(old) + " TO " + q(c.Name), codec.ActionModifyColumn, nil
	case StepAddIndex:
		x := b.randomIndex(r, t, free)
		if x == nil {
			return "", 0, nil
		}
		mark(x.Cols...)
		return "ADD " + x.def(), codec.ActionAddIndex, x
	case StepDropIndex:
		// A handle key may go too: the table then has no key (or
		// another unique index of NOT NULL columns becomes it).
		var cs []*Index
		for _, x := range t.Idx {
			if !x.primary() && !slices.ContainsFunc(x.Cols, t.fkCol) && free(x.Cols...) {
				cs = append(cs, x)
			}
		}
		if len(cs) == 0 {
			return "", 0, nil
		}
		x := cs[r.IntN(len(cs))]
		t.Idx = slices.DeleteFunc(t.Idx, func(y *Index) bool { return y == x })
		mark(x.Cols...)
		return "DROP INDEX " + q(x.Name), codec.ActionDropIndex, x
	}
	return "", 0, nil
}
