package apply

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/redokit/redokit/apply/internal/mysqltok"
	"github.com/redokit/redokit/codec"
)

// This file holds two Source wrappers an operator puts between a log and
// Run: FilterTables (which tables to replay) and MapSchemas (into which
// schema). They are Sources over Sources, so the CLI, sinkgate.ApplyTo and
// any other caller of Run share one rule. The reader has a table filter of
// its own (reader.Options.TableFilter), but it is a yes/no per table name: it
// cannot drop a DDL while refusing another, nor fail on a RENAME that
// crosses the boundary, and a sink gate's batches never pass through a
// reader. So the rule lives here, on decoded events.

// ErrFilterBoundary is wrapped by the error a FilterTables source yields for
// a DDL that touches selected and unselected tables at once — most often a
// RENAME TABLE from a selected table to an unselected one or back. Applying
// it, or dropping it, would leave the downstream different from the filtered
// upstream without a word, so the apply stops there and names it.
var ErrFilterBoundary = errors.New("DDL crosses the table filter's boundary")

// ErrSchemaMap is wrapped by the error a MapSchemas source yields when a
// mapping cannot be applied exactly: a DDL whose text names the mapped
// schema in a way a token-level rewrite cannot tell apart from a table, or a
// schema of the log that another schema is mapped onto.
var ErrSchemaMap = errors.New("schema mapping")

// tablePattern is one parsed schema.table glob.
type tablePattern struct {
	text, schema, table string
}

func (p tablePattern) matches(t Table) bool {
	ok, _ := path.Match(p.schema, t.Schema)
	if !ok {
		return false
	}
	ok, _ = path.Match(p.table, t.Name)
	return ok
}

// MatchTable returns a matcher of one schema.table pattern, as FilterTables
// and redokit's --table read them (shell globs in each part), or the error
// CheckTablePattern gives.
func MatchTable(p string) (func(Table) bool, error) {
	tp, err := parseTablePattern(p)
	if err != nil {
		return nil, err
	}
	return tp.matches, nil
}

// CheckTablePattern reports whether p is a table pattern FilterTables
// takes: schema.table, each part a path.Match glob (*, ?, [a-z], \ to
// escape), split at the first dot. A name without a dot, an empty part and a
// malformed glob are errors naming p.
func CheckTablePattern(p string) error {
	_, err := parseTablePattern(p)
	return err
}

func parseTablePattern(p string) (tablePattern, error) {
	schema, table, ok := strings.Cut(p, ".")
	if !ok {
		return tablePattern{}, fmt.Errorf("table pattern %q: want schema.table (globs allowed, e.g. shop.* or *.orders)", p)
	}
	if schema == "" || table == "" {
		return tablePattern{}, fmt.Errorf("table pattern %q: the schema and the table part must not be empty", p)
	}
	for _, g := range []string{schema, table} {
		if _, err := path.Match(g, ""); err != nil {
			return tablePattern{}, fmt.Errorf("table pattern %q: bad glob %q: %w", p, g, err)
		}
	}
	return tablePattern{text: p, schema: schema, table: table}, nil
}

// tableFilter is the parsed include and exclude lists.
type tableFilter struct {
	include, exclude []tablePattern
}

// selects reports whether the filter keeps table t: some include pattern
// matches it (or there is none), and no exclude pattern does.
func (f *tableFilter) selects(t Table) bool {
	if len(f.include) > 0 && !slices.ContainsFunc(f.include, func(p tablePattern) bool { return p.matches(t) }) {
		return false
	}
	return !slices.ContainsFunc(f.exclude, func(p tablePattern) bool { return p.matches(t) })
}

// selectsSchema is the rule for a DDL that names no table (CREATE, ALTER and
// DROP DATABASE): it passes when some include pattern's schema part matches
// its schema, or there is no include list; and it is dropped when an exclude
// pattern excludes the whole schema (its table part is "*"), so that
// --exclude-table 'shop.*' never drops the downstream's shop.
func (f *tableFilter) selectsSchema(schema string) bool {
	for _, p := range f.exclude {
		if ok, _ := path.Match(p.schema, schema); ok && p.table == "*" {
			return false
		}
	}
	if len(f.include) == 0 {
		return true
	}
	return slices.ContainsFunc(f.include, func(p tablePattern) bool {
		ok, _ := path.Match(p.schema, schema)
		return ok
	})
}

// FilterTables returns a Source that yields the events of src that belong to
// the selected tables. A table (schema.name, as the log names it: the
// patterns see the names before any MapSchemas) is selected when it matches
// some pattern of include, or include is empty, and matches no pattern of
// exclude. Patterns are those of [CheckTablePattern]; a bad one is an error
// naming it, before anything is read.
//
// Row changes of a table not selected are dropped. A DDL is judged by every
// table it names — DDL.Table, DDL.Tables, and for a RENAME (RENAME TABLE, or
// ALTER TABLE … RENAME TO) both the old and the new name, read from the
// query, unqualified names in the DDL's schema:
//
//   - every one selected: the DDL passes;
//   - none selected: it is dropped;
//   - some of each (a RENAME from a selected table to an unselected one or
//     back, a DROP TABLE of two tables on both sides): the source yields a
//     [*FilterBoundaryError] (wrapping [ErrFilterBoundary]) naming the DDL,
//     its commit ts, the tables on each side and the ways on, and Run stops
//     before it. Applying it would carry an unselected table into the
//     downstream, dropping it would leave a selected one behind under its
//     old name: either way the downstream silently stops matching the
//     filtered upstream. The filter does not follow a rename by itself: a
//     run that resumes past it with the same patterns would not select the
//     new name, and a table renamed into the filter brings rows the
//     downstream never had. The operator ends the apply before the DDL, or
//     selects the new name of a table renamed out of the filter.
//
// A DDL that names no table (CREATE, ALTER or DROP DATABASE) passes when its
// schema matches the schema part of some include pattern, or there is no
// include list — unless an exclude pattern excludes its whole schema
// (schema.*), which drops it.
//
// A RENAME whose query does not parse as one (the names it renames cannot be
// read) is an error too: the filter cannot tell which side it is on.
//
// The progress a sink records does not remember the filter: resuming with a
// different one skips the rows of a newly selected table below the recorded
// DDL mark, and counts DDLs at one commit ts differently. Keep one filter
// per progress (SinkOptions.SinkName or ProgressTable apart).
func FilterTables(src Source, include, exclude []string) (Source, error) {
	f := &tableFilter{}
	for _, p := range include {
		tp, err := parseTablePattern(p)
		if err != nil {
			return nil, fmt.Errorf("apply: include %w", err)
		}
		f.include = append(f.include, tp)
	}
	for _, p := range exclude {
		tp, err := parseTablePattern(p)
		if err != nil {
			return nil, fmt.Errorf("apply: exclude %w", err)
		}
		f.exclude = append(f.exclude, tp)
	}
	return func(yield func(*codec.Event, error) bool) {
		for ev, err := range src {
			if err != nil {
				yield(nil, err)
				return
			}
			keep, err := f.keeps(ev)
			if err != nil {
				yield(nil, err)
				return
			}
			if keep && !yield(ev, nil) {
				return
			}
		}
	}, nil
}

// keeps decides one event.
func (f *tableFilter) keeps(ev *codec.Event) (bool, error) {
	if ev.Kind != codec.DDLEvent {
		return f.selects(TableOf(ev.Row.Table)), nil
	}
	d := &ev.DDL
	var in, out []Table
	add := func(t Table) {
		if f.selects(t) {
			if !slices.Contains(in, t) {
				in = append(in, t)
			}
		} else if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	if d.Table.Name != "" {
		add(TableOf(d.Table))
	}
	for _, t := range d.Tables {
		if t.Name != "" {
			add(TableOf(t.TableName))
		}
	}
	renames, err := ddlRenames(d)
	if err != nil {
		return false, fmt.Errorf("apply: table filter: DDL at commit ts %d %q: %w", d.CommitTs, d.Query, err)
	}
	var crossing []TableRename
	for _, r := range renames {
		from, to := f.selects(r[0]), f.selects(r[1])
		if from != to {
			crossing = append(crossing, TableRename{From: r[0], To: r[1], FromSelected: from})
		}
		add(r[0])
		add(r[1])
	}
	switch {
	case len(in) > 0 && len(out) > 0:
		return false, &FilterBoundaryError{CommitTs: d.CommitTs, Query: d.Query, Selected: in, NotSelected: out, Renames: crossing}
	case len(in) > 0:
		return true, nil
	case len(out) > 0:
		return false, nil
	}
	return f.selectsSchema(d.Table.Schema), nil
}

// FilterBoundaryError is the error a FilterTables source yields for a DDL
// that touches tables the filter selects and tables it does not (it wraps
// ErrFilterBoundary). Run stops before the DDL, and a run again with the same
// filter stops there again: the filter cannot say which side the DDL's
// tables belong on. The ways on are three:
//
//   - End the apply just before it (Source events up to CommitTs-1; redokit
//     apply --end-ts CommitTs-1).
//   - A RENAME of a selected table to a name the filter does not select:
//     select the new name too. The rename then passes, the downstream's
//     table takes the new name, and its rows after the rename follow it.
//   - A RENAME of a table the filter does not select to a selected name,
//     and any other DDL on both sides: the downstream lacks the unselected
//     tables, which the filter left out so far, and the DDL needs them (the
//     renamed table's rows become the selected table's). Select them only
//     once the downstream holds them as the log has them at CommitTs-1
//     (restored there, or applied from where they begin into a fresh
//     downstream with them selected): a resumed apply skips their rows below
//     the progress it recorded without them.
type FilterBoundaryError struct {
	CommitTs uint64
	Query    string
	// Selected and NotSelected are the tables the DDL names, by side.
	Selected, NotSelected []Table
	// Renames are the renames of the DDL that cross the boundary.
	Renames []TableRename
}

// TableRename is one rename of a DDL: From becomes To.
type TableRename struct {
	From, To     Table
	FromSelected bool // From is selected and To is not; else the other way round
}

func (e *FilterBoundaryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apply: %v: DDL at commit ts %d %q ", ErrFilterBoundary, e.CommitTs, e.Query)
	side := func(sel bool) string {
		if sel {
			return "selected"
		}
		return "not selected"
	}
	if len(e.Renames) > 0 {
		for i, r := range e.Renames {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "renames %s (%s) to %s (%s)", r.From, side(r.FromSelected), r.To, side(!r.FromSelected))
		}
	} else {
		fmt.Fprintf(&b, "touches selected tables %v and tables not selected %v", e.Selected, e.NotSelected)
	}
	if e.CommitTs > 0 {
		fmt.Fprintf(&b, "; to go on, end the apply at commit ts %d, before it", e.CommitTs-1)
	}
	if e.Follows() {
		fmt.Fprintf(&b, ", or select %s too (the rename then carries the table there, and its rows after the rename follow it)", tableList(e.NotSelected))
	} else {
		fmt.Fprintf(&b, ", or select %s too once the downstream holds %s as the log has them at commit ts %d (the filter left them out so far, and the DDL needs them)",
			tableList(e.NotSelected), tableList(e.Needs()), e.CommitTs-1)
	}
	return b.String()
}

func (e *FilterBoundaryError) Unwrap() error { return ErrFilterBoundary }

// Follows reports whether selecting the tables not selected too lets the
// apply go on as it is: the DDL renames selected tables to unselected names,
// and needs no table the downstream lacks (Needs).
func (e *FilterBoundaryError) Follows() bool {
	return len(e.Renames) > 0 && len(e.Needs()) == 0
}

// Needs returns the tables not selected that the DDL needs downstream: all
// of them but the new names of tables it renames out of the filter. The
// filter left them out so far.
func (e *FilterBoundaryError) Needs() []Table {
	var out []Table
	for _, t := range e.NotSelected {
		if !slices.ContainsFunc(e.Renames, func(r TableRename) bool { return r.FromSelected && r.To == t }) {
			out = append(out, t)
		}
	}
	return out
}

func tableList(ts []Table) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// DDLRenames returns the (old, new) table pairs a DDL renames: RENAME TABLE
// a TO b[, c TO d…] and ALTER TABLE a … RENAME [TO|AS] b, unqualified names
// in the DDL's schema. It fails on a DDL of a rename action whose query does
// not name the tables it renames.
func DDLRenames(d *codec.DDL) ([][2]Table, error) { return ddlRenames(d) }

// ddlRenames returns the (old, new) table pairs a DDL's query renames:
// RENAME TABLE a TO b[, c TO d…] and ALTER TABLE a … RENAME [TO|AS] b.
// Unqualified names are in the DDL's schema. A DDL of a rename action whose
// query yields none is an error: the caller cannot tell what it renames.
func ddlRenames(d *codec.DDL) ([][2]Table, error) {
	toks, err := mysqltok.Tokenize(d.Query)
	if err != nil {
		if isRenameAction(d.Type) {
			return nil, err
		}
		// Not a rename, and not our text to judge: the sink will.
		return nil, nil
	}
	s := mysqltok.Solid(toks)
	name := func(i int) (Table, int, bool) {
		if i >= len(s) || !s[i].IsName() {
			return Table{}, i, false
		}
		if i+2 < len(s) && s[i+1].Is('.') && s[i+2].IsName() {
			return Table{Schema: s[i].Name(), Name: s[i+2].Name()}, i + 3, true
		}
		return Table{Schema: d.Table.Schema, Name: s[i].Name()}, i + 1, true
	}
	var out [][2]Table
	switch {
	case len(s) >= 2 && s[0].Word() == "RENAME" && (s[1].Word() == "TABLE" || s[1].Word() == "TABLES"):
		for i := 2; ; {
			from, j, ok := name(i)
			if !ok || j >= len(s) || s[j].Word() != "TO" {
				return nil, fmt.Errorf("cannot read the tables it renames")
			}
			to, k, ok := name(j + 1)
			if !ok {
				return nil, fmt.Errorf("cannot read the tables it renames")
			}
			out = append(out, [2]Table{from, to})
			if k < len(s) && s[k].Is(',') {
				i = k + 1
				continue
			}
			break
		}
	case len(s) >= 2 && s[0].Word() == "ALTER" && slices.ContainsFunc(s, func(t mysqltok.Token) bool { return t.Word() == "RENAME" }):
		i := 1
		for i < len(s) && s[i].Word() != "TABLE" {
			i++ // ALTER [ONLINE] [IGNORE] TABLE
		}
		from, j, ok := name(i + 1)
		if !ok {
			break
		}
		for ; j < len(s); j++ {
			if s[j].Word() != "RENAME" || j+1 >= len(s) {
				continue
			}
			switch s[j+1].Word() {
			case "COLUMN", "INDEX", "KEY":
				continue
			}
			k := j + 1
			if w := s[k].Word(); w == "TO" || w == "AS" {
				k++
			}
			if to, _, ok := name(k); ok {
				out = append(out, [2]Table{from, to})
			}
		}
	}
	if len(out) == 0 && isRenameAction(d.Type) {
		return nil, fmt.Errorf("a %s whose query does not name the tables it renames", d.Type)
	}
	return out, nil
}

func isRenameAction(a codec.ActionType) bool {
	return a == codec.ActionRenameTable || a == codec.ActionRenameTables
}

// MapSchemas returns a Source that yields the events of src with the
// schemas of m (from → to) renamed: a row change's Table.Schema; a DDL's
// Table.Schema, the schemas in DDL.Tables, and in its query the schema part
// of every qualified name (from.t or `from`.`t` becomes `to`.`t`) and the
// database of CREATE, ALTER and DROP DATABASE/SCHEMA from. Schema names
// compare case-insensitively, as the upstream's (TiDB's) do. The mapping is
// applied once: a=b,b=a swaps two schemas.
//
// The rewrite of the query is token-aware (strings, comments and quoted
// identifiers are never touched), not a parse: where the text names the
// schema in a way a token cannot tell apart from a table or an alias — a
// view's body that also names a table or alias like the schema — the source
// yields an error wrapping [ErrSchemaMap] naming the DDL rather than guess;
// so does a qualified name in double quotes (ANSI_QUOTES), and an event of a
// schema of the log that another schema is mapped onto (their tables would
// mix in the downstream).
//
// The events yielded are copies where anything changed: src's events are
// never modified (the Table names and the DDL's table list are copied; the
// columns are shared, as Source's contract allows).
func MapSchemas(src Source, m map[string]string) (Source, error) {
	from := map[string]string{}
	targets := map[string]string{} // lower(to) → from
	for f, t := range m {
		if f == "" || t == "" {
			return nil, fmt.Errorf("apply: %w %q=%q: empty schema name", ErrSchemaMap, f, t)
		}
		k := strings.ToLower(f)
		if _, dup := from[k]; dup {
			return nil, fmt.Errorf("apply: %w: schema %q mapped twice", ErrSchemaMap, f)
		}
		from[k] = t
		targets[strings.ToLower(t)] = f
	}
	sm := &schemaMap{from: from, targets: targets}
	return func(yield func(*codec.Event, error) bool) {
		var cp codec.Event
		for ev, err := range src {
			if err != nil {
				yield(nil, err)
				return
			}
			out, err := sm.event(ev, &cp)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(out, nil) {
				return
			}
		}
	}, nil
}

type schemaMap struct {
	from    map[string]string // lower(from) → to
	targets map[string]string // lower(to) → from
}

// schema maps one schema name; a name that another schema is mapped onto,
// and that is not mapped away itself, is an error.
func (m *schemaMap) schema(s string) (string, bool, error) {
	k := strings.ToLower(s)
	if to, ok := m.from[k]; ok {
		return to, true, nil
	}
	if f, ok := m.targets[k]; ok {
		return "", false, fmt.Errorf("apply: %w %s=%s: the log has schema %q too, and its tables would mix with those of %s in the downstream (map it elsewhere too)",
			ErrSchemaMap, f, s, s, f)
	}
	return s, false, nil
}

// event returns ev mapped: ev itself when nothing changes, else cp filled
// with a copy.
func (m *schemaMap) event(ev *codec.Event, cp *codec.Event) (*codec.Event, error) {
	if ev.Kind != codec.DDLEvent {
		to, ok, err := m.schema(ev.Row.Table.Schema)
		if err != nil || !ok {
			return ev, err
		}
		*cp = *ev
		cp.Row.Table.Schema = to
		return cp, nil
	}
	d := &ev.DDL
	changed := false
	schema, ok, err := m.schema(d.Table.Schema)
	if err != nil {
		return nil, err
	}
	changed = changed || ok
	var tables []codec.DDLTable
	for i, t := range d.Tables {
		s, ok, err := m.schema(t.Schema)
		if err != nil {
			return nil, err
		}
		if ok {
			if tables == nil {
				tables = slices.Clone(d.Tables)
			}
			tables[i].Schema = s
			changed = true
		}
	}
	query, qchanged, err := m.query(d)
	if err != nil {
		return nil, err
	}
	if !changed && !qchanged {
		return ev, nil
	}
	*cp = *ev
	cp.DDL.Table.Schema = schema
	if tables != nil {
		cp.DDL.Tables = tables
	}
	cp.DDL.Query = query
	return cp, nil
}

// query rewrites the mapped schemas in a DDL's text.
func (m *schemaMap) query(d *codec.DDL) (string, bool, error) {
	toks, err := mysqltok.Tokenize(d.Query)
	if err != nil {
		// Text we cannot tokenize may still name a mapped schema:
		// refuse rather than run it unmapped.
		return "", false, fmt.Errorf("apply: %w: DDL at commit ts %d %q: %v", ErrSchemaMap, d.CommitTs, d.Query, err)
	}
	s := mysqltok.Solid(toks)
	isView := slices.ContainsFunc(s, func(t mysqltok.Token) bool { return t.Word() == "VIEW" })
	replace := map[int]string{} // token offset → new text
	var others []string         // mapped schema names seen where no schema can be
	for i, t := range s {
		if t.Kind == mysqltok.String && t.Text[0] == '"' && (i+1 < len(s) && s[i+1].Is('.') || i > 0 && s[i-1].Is('.')) {
			return "", false, fmt.Errorf("apply: %w: DDL at commit ts %d %q: a qualified name in double quotes (ANSI_QUOTES): cannot tell whether it names a mapped schema",
				ErrSchemaMap, d.CommitTs, d.Query)
		}
		if !t.IsName() {
			continue
		}
		to, ok := m.from[strings.ToLower(t.Name())]
		if !ok {
			continue
		}
		switch {
		case i > 0 && databaseWord(s, i):
			replace[t.Off] = quoteIdent(to)
		case i+2 < len(s) && s[i+1].Is('.') && (s[i+2].IsName() || s[i+2].Is('*')) && (i == 0 || !s[i-1].Is('.')):
			replace[t.Off] = quoteIdent(to)
		default:
			others = append(others, t.Text)
		}
	}
	if len(replace) == 0 {
		return d.Query, false, nil
	}
	if isView && len(others) > 0 {
		return "", false, fmt.Errorf("apply: %w: DDL at commit ts %d %q: names %s both as a schema and as a table, column or alias: cannot tell which to map",
			ErrSchemaMap, d.CommitTs, d.Query, others[0])
	}
	// Rebuilt from the query itself, whose comments the tokens do not
	// keep.
	var b strings.Builder
	for i, t := range toks {
		end := len(d.Query)
		if i+1 < len(toks) {
			end = toks[i+1].Off
		}
		if r, ok := replace[t.Off]; ok && t.Kind != mysqltok.Space {
			b.WriteString(r)
			continue
		}
		b.WriteString(d.Query[t.Off:end])
	}
	return b.String(), true, nil
}

// databaseWord reports whether s[i] is the name after DATABASE or SCHEMA
// (CREATE DATABASE IF NOT EXISTS x, DROP SCHEMA IF EXISTS x, ALTER DATABASE x).
func databaseWord(s []mysqltok.Token, i int) bool {
	j := i - 1
	for j >= 0 {
		switch s[j].Word() {
		case "IF", "NOT", "EXISTS":
			j--
			continue
		case "DATABASE", "SCHEMA":
			return j > 0 && slices.Contains([]string{"CREATE", "DROP", "ALTER"}, s[j-1].Word())
		}
		return false
	}
	return false
}

// quoteIdent quotes a MySQL identifier with backquotes.
func quoteIdent(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "``") + "`"
}
