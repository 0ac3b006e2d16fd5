package sqlsink

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// A table without a key holds rows that cannot be told apart: an insert
// replayed over a downstream that holds it already is a second row, and
// nothing in the row says so. Run's progress keeps a replay over this
// sink's own writes exact (it skips what the progress records); what it
// cannot see is a downstream written by something else — the downstream's
// own sink, which ran past the log's checkpoint before the disaster. There
// the sink counts, per table, the rows it inserts where an identical row was
// already there (Conflicts.DuplicatedKeyless), so that a replay that doubled
// rows says so.
//
// Checking costs a scan of the table per statement of inserts (the table
// has no key to look a row up by), so the sink checks only where rows may be
// someone else's. When it first writes a table without a key in a Run that
// keeps progress (it read its Progress), it looks whether the table holds
// any row:
//
//   - none: every row it will hold is the apply's; nothing is checked.
//   - some, and Run skipped rows of the table as covered by the progress
//     (apply.RunSkipped): a resume over this log's own earlier apply, whose
//     progress keeps it exact; nothing is checked.
//   - some, and Run skipped none: the replay starts past what the progress
//     records of the table (or it records nothing), so the rows there were
//     written by something else — the downstream's own sink, or an apply
//     that keeps no progress (sinkgate.ApplyTo) after an earlier recovery;
//     every statement of inserts is checked.
//
// A table without a key may hold identical rows legitimately, so the count
// is an upper bound of the rows the replay doubled. An apply that keeps no
// progress (sinkgate.ApplyTo) checks nothing.

// klCheck is what the sink knows of the rows of a table without a key.
type klCheck uint8

const (
	klUnknown klCheck = iota // not written yet
	klClean                  // its rows are the apply's: inserts are not checked
	klForeign                // it held rows the progress does not account for: every insert is checked
)

// noteProgress notes that Progress was read: an apply that keeps progress
// runs (see learnKeyless).
func (s *SQLSink) noteProgress() {
	s.klMu.Lock()
	defer s.klMu.Unlock()
	s.readMarks = true
}

// learnKeyless decides, when the sink first writes a table without a key
// (img is one of its images), whether its inserts are checked (see above).
func (t *sqlTx) learnKeyless(ctx context.Context, table apply.Table, img []codec.Column) error {
	if codec.KeyColumns(img) != nil {
		return nil
	}
	s := t.s
	s.klMu.Lock()
	state, read := s.kl[table], s.readMarks
	s.klMu.Unlock()
	if state != klUnknown {
		return nil
	}
	state = klClean
	if skipped, run := apply.RunSkipped(ctx, table); read && run && skipped == 0 && s.o.DryRun == nil {
		q, ok := t.ex.(Queryer)
		if !ok {
			return fmt.Errorf("apply: %s: no way to read table %s", s.name, table)
		}
		b := append([]byte("SELECT 1 FROM "), s.d.table(nil, table)...)
		b = append(b, " LIMIT 1"...)
		rows, err := q.QueryContext(ctx, string(b))
		if err != nil {
			return &apply.StatementError{Table: table, SQL: string(b), Err: s.d.classify(err)}
		}
		some := rows.Next()
		rows.Close()
		if err := rows.Err(); err != nil {
			return &apply.StatementError{Table: table, SQL: string(b), Err: s.d.classify(err)}
		}
		if some {
			state = klForeign
		}
	}
	s.klMu.Lock()
	if s.kl == nil {
		s.kl = map[apply.Table]klCheck{}
	}
	s.kl[table] = state
	s.klMu.Unlock()
	return nil
}

// forgetKeyless updates what the sink knows of the rows of the tables a DDL
// names: a table created, dropped or truncated is learned again (it is
// empty, or gone), a renamed one keeps what the sink knew under its new
// name.
func (s *SQLSink) forgetKeyless(ddl *codec.DDL) {
	s.klMu.Lock()
	defer s.klMu.Unlock()
	if len(s.kl) == 0 {
		return
	}
	switch ddl.Type {
	case codec.ActionCreateTable, codec.ActionCreateTables, codec.ActionDropTable, codec.ActionTruncateTable,
		codec.ActionRecoverTable, codec.ActionDropSchema:
		if ddl.Type == codec.ActionDropSchema {
			maps.DeleteFunc(s.kl, func(t apply.Table, _ klCheck) bool { return strings.EqualFold(t.Schema, ddl.Table.Schema) })
		}
		s.forgetKeylessOf(apply.TableOf(ddl.Table))
		for _, t := range ddl.Tables {
			s.forgetKeylessOf(apply.TableOf(t.TableName))
		}
	case codec.ActionRenameTable, codec.ActionRenameTables:
		renames, err := apply.DDLRenames(ddl)
		if err != nil {
			return // the DDL did not run either
		}
		moved := map[apply.Table]klCheck{}
		for _, r := range renames {
			for t, st := range s.kl {
				if s.sameTable(t, r[0]) {
					moved[r[1]] = st
					delete(s.kl, t)
				}
			}
		}
		for _, r := range renames {
			// What was known under the new name (in any schema, on
			// SQLite) is of a table that is no longer there.
			s.forgetKeylessOf(r[1])
			if st, ok := moved[r[1]]; ok {
				s.kl[r[1]] = st
			}
		}
	}
}

// forgetKeylessOf forgets what the sink knew of the rows of the downstream
// table t names (sameTable). The caller holds klMu.
func (s *SQLSink) forgetKeylessOf(t apply.Table) {
	maps.DeleteFunc(s.kl, func(k apply.Table, _ klCheck) bool { return s.sameTable(k, t) })
}

// keylessChecked reports whether the inserts into table are checked.
func (t *sqlTx) keylessChecked(table apply.Table) bool {
	t.s.klMu.Lock()
	defer t.s.klMu.Unlock()
	return t.s.kl[table] == klForeign
}

// maxCheckImages bounds the images one duplicate check counts.
const maxCheckImages = 128

// keylessDuplicates counts the rows of ops (upserts of a table without a
// key, about to be inserted) that the downstream holds an identical row of
// already, when the table's inserts are checked, and adds them to the
// transaction's conflicts. Each distinct image counts min(its copies in
// ops, the identical rows downstream):
//
//	SELECT COUNT(CASE WHEN `a` = ? AND `b` IS NULL THEN 1 END), COUNT(CASE WHEN … THEN 1 END) FROM t
func (t *sqlTx) keylessDuplicates(ctx context.Context, table apply.Table, ops []rowOp) error {
	if len(ops) == 0 || codec.KeyColumns(ops[0].img) != nil || !t.keylessChecked(table) {
		return nil
	}
	q, ok := t.ex.(Queryer)
	if !ok {
		return fmt.Errorf("apply: %s: no way to read table %s", t.s.name, table)
	}
	// The distinct images, and their copies.
	type image struct {
		op     int
		copies int64
	}
	var images []image
	seen := map[string]int{}
	for i := range ops {
		t.ckey = appendImage(t.ckey[:0], ops[i].img)
		if j, ok := seen[string(t.ckey)]; ok {
			images[j].copies++
			continue
		}
		seen[string(t.ckey)] = len(images)
		images = append(images, image{op: i, copies: 1})
	}
	cols := max(1, len(ops[0].img))
	chunk := max(1, min(maxCheckImages, t.s.d.maxParams()/cols))
	var dups int64
	for len(images) > 0 {
		part := images[:min(chunk, len(images))]
		images = images[len(part):]
		b := append(t.cbuf[:0], "SELECT "...)
		args := t.cargs[:0]
		for i, im := range part {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, "COUNT(CASE WHEN "...)
			b, args = t.matchRow(b, args, ops[im.op].img)
			b = append(b, " THEN 1 END)"...)
		}
		b = append(b, " FROM "...)
		b = t.s.d.table(b, table)
		t.cbuf, t.cargs = b, args
		rows, err := q.QueryContext(ctx, t.text(table, b), args...)
		if err != nil {
			return &apply.StatementError{Table: table, FirstTs: ops[0].ts, LastTs: ops[len(ops)-1].ts,
				SQL: "SELECT COUNT(CASE WHEN … THEN 1 END), … FROM " + string(t.s.d.table(nil, table)), Err: t.s.d.classify(err)}
		}
		found := make([]int64, len(part))
		ptrs := make([]any, len(part))
		for i := range found {
			ptrs[i] = &found[i]
		}
		if rows.Next() {
			err = rows.Scan(ptrs...)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
		if err != nil {
			return fmt.Errorf("apply: table %s: count the rows identical to those inserted: %w", table, t.s.d.classify(err))
		}
		for i, im := range part {
			dups += min(im.copies, found[i])
		}
	}
	clear(t.cargs)
	t.conflicts.Add(table, 0, 0, dups)
	return nil
}

// matchRow appends the condition that a row holds exactly img's values
// (generated columns left out), as a delete of a table without a key
// matches its row, binding its values into args.
func (t *sqlTx) matchRow(b []byte, args []any, img []codec.Column) ([]byte, []any) {
	n := 0
	for i := range img {
		c := &img[i]
		if c.Flags.Has(codec.FlagGenerated) {
			continue
		}
		if n > 0 {
			b = append(b, " AND "...)
		}
		b, args = t.exactCondArgs(b, args, c)
		n++
	}
	if n == 0 {
		b = append(b, "1 = 1"...)
	}
	return b, args
}
