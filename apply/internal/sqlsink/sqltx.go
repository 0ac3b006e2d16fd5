package sqlsink

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// sqlTx is one transaction of a SQLSink.
type sqlTx struct {
	s    *SQLSink
	tx   *sql.Tx
	conn *sql.Conn // PostgreSQL: the connection of tx, for COPY (copy.go)
	// guard: the context tx was begun with, which the apply's end does not
	// reach once the COMMIT is sent (commitguard.go).
	guard *commitGuard
	ex    execer         // tx, or a *sql.DB for the autocommit baseline of the benchmark
	lite  *sqliteSession // SQLite: where full-size statements stay prepared
	txScratch

	collapsed bool // the ops hold at most one op per key
	// keyTarget: SQLite's upserts of the table being written name its key
	// as their conflict target (see onConflict).
	keyTarget bool
	conflicts apply.Conflicts // of this transaction, added to the sink's at commit
	// deferredFK: a group of this transaction had its foreign-key checks
	// deferred to its end (see fkdefer.go); on SQLite, to the COMMIT.
	deferredFK bool
}

// txScratch is the memory a transaction builds its statements in. The sink
// keeps it from one transaction to the next (SQLSink.scratch), so that a
// replay does not grow its buffers again in every transaction.
type txScratch struct {
	ops  []rowOp
	buf  []byte
	args []any
	last map[string]int // collapse: key → index of its last op
	kb   []byte
	keep []bool  // collapse: the ops kept
	out  []rowOp // collapse: the ops kept, in their new order

	// What the duplicate checks and REPLACE deletes build their statements
	// in, beside the statement in buf and args.
	cbuf  []byte
	cargs []any
	ckey  []byte
}

// maxScratchBytes bounds the buffers a sink keeps for its next
// transaction: larger ones (a batch of big values, or the ops of one
// commit ts of millions of rows, which one ApplyRows call holds) are left
// to the collector.
const maxScratchBytes = 16 << 20

// size is about the memory sc keeps: its slices' capacities, and the
// entries of its map (which never shrinks).
func (sc *txScratch) size() int {
	const anySize, entrySize = 16, 32
	return cap(sc.buf) + cap(sc.cbuf) + cap(sc.kb) + cap(sc.ckey) + cap(sc.keep) +
		(cap(sc.ops)+cap(sc.out))*int(unsafe.Sizeof(rowOp{})) +
		(cap(sc.args)+cap(sc.cargs))*anySize + len(sc.last)*entrySize
}

// takeScratch gives t the scratch memory of a finished transaction, if the
// sink kept one.
func (t *sqlTx) takeScratch() {
	if p, _ := t.s.scratch.Get().(*txScratch); p != nil {
		t.txScratch = *p
	}
}

// giveScratch hands t's scratch memory back to the sink, holding no
// reference to the rows or values t wrote (they belong to apply.Run, which
// reuses them): a transaction ends once, but a failed Commit is followed by
// a Rollback, which gives back nothing then.
func (t *sqlTx) giveScratch() {
	sc := t.txScratch
	t.txScratch = txScratch{}
	if sc.buf == nil && sc.ops == nil || sc.size() > maxScratchBytes {
		return
	}
	clear(sc.ops[:cap(sc.ops)])
	clear(sc.args[:cap(sc.args)])
	clear(sc.cargs[:cap(sc.cargs)])
	clear(sc.last)
	t.s.scratch.Put(&sc)
}

// rowOp is one statement's worth of a row change: a delete of an image, or an
// upsert (REPLACE) of one.
type rowOp struct {
	del bool
	ts  uint64
	img []codec.Column
	// madeHere: a delete that collapse kept after an upsert of the same
	// key in the batch, whose row may never have reached the database; it
	// missing is no conflict.
	madeHere bool
	// fresh: an upsert of an inserted row whose key no other op of the
	// batch has (collapse clears it when it folds others away): no row
	// downstream held its key, nor any unique value the batch moves
	// (see units).
	fresh bool
}

// collapse reduces t.ops, when their keys allow it, to the last op of each
// key: first the deletes of keys whose last op is a delete, then the upserts
// of the others, each in the order of their last ops. Applying them gives
// the same rows as applying every op in order — a row's final image is all
// that a REPLACE leaves, and a delete before it changes nothing — but in
// far fewer, larger statements than the commit-ts-by-commit-ts order, which
// alternates deletes and upserts. (A REPLACE may delete a stale row that
// holds a unique value the new image takes; that row's own final image, if
// it has one, is among the upserts, so it comes back.)
//
// It applies only when every op's key compares by bytes the way the
// database compares it: integers, dates, times, binary strings, decimals of
// one column (one scale), and strings of a _bin collation (on MySQL
// trailing spaces ignored, as PAD SPACE does; SQLite and PostgreSQL compare
// them too). A string key of a case- or accent-insensitive
// (or unknown) collation, a float or a NULL in a key, or a table without a
// key leaves the ops as they are.
func (t *sqlTx) collapse() {
	t.collapsed = len(t.ops) < 2
	if t.collapsed {
		return
	}
	key0 := codec.KeyColumns(t.ops[0].img)
	if key0 == nil {
		return
	}
	if t.last == nil {
		t.last = map[string]int{}
	}
	clear(t.last)
	for i := range t.ops {
		img := t.ops[i].img
		kb, ok := t.keyBytes(t.kb[:0], img, key0)
		t.kb = kb
		if !ok {
			return
		}
		if _, again := t.last[string(kb)]; again {
			t.ops[i].fresh = false // ops before it are folded away
		}
		t.last[string(kb)] = i
	}
	keep := slices.Grow(t.keep[:0], len(t.ops))[:len(t.ops)]
	clear(keep)
	t.keep = keep
	for _, i := range t.last {
		keep[i] = true
	}
	// A kept delete after an upsert of its key: the row may be the batch's
	// own (an insert and a delete collapsed to the delete alone).
	for i := range t.ops {
		if !t.ops[i].del {
			kb, _ := t.keyBytes(t.kb[:0], t.ops[i].img, key0)
			t.kb = kb
			if j := t.last[string(kb)]; j > i && t.ops[j].del {
				t.ops[j].madeHere = true
			}
		}
	}
	out := slices.Grow(t.out[:0], len(t.last))
	for _, del := range []bool{true, false} {
		for i, op := range t.ops {
			if keep[i] && op.del == del {
				out = append(out, op)
			}
		}
	}
	clear(t.ops)
	t.ops = append(t.ops[:0], out...)
	clear(out)
	t.out = out[:0]
	t.collapsed = true
}

// keyBytes appends an exact encoding of img's key (the columns at the
// indexes of key0, which must carry the same names), or reports false when
// the key cannot be compared by bytes (see collapse).
func (t *sqlTx) keyBytes(b []byte, img []codec.Column, key0 []int) ([]byte, bool) {
	for _, i := range key0 {
		if i >= len(img) || !img[i].Flags.Has(codec.FlagHandleKey) && !img[i].Flags.Has(codec.FlagPrimaryKey) ||
			img[i].Name != t.ops[0].img[i].Name {
			return b, false
		}
		c := &img[i]
		v := c.Value
		b = append(b, byte(v.Kind()))
		switch v.Kind() {
		case codec.KindInt:
			b = binary.AppendVarint(b, v.Int())
		case codec.KindUint, codec.KindBit, codec.KindEnum, codec.KindSet:
			b = binary.AppendUvarint(b, v.Uint())
		case codec.KindYear:
			b = binary.AppendUvarint(b, uint64(v.Year()))
		case codec.KindDate, codec.KindDatetime, codec.KindTimestamp:
			d := v.DateTime()
			b = binary.AppendUvarint(b, uint64(d.Year)<<40|uint64(d.Month)<<32|uint64(d.Day)<<24|uint64(d.Hour)<<16|uint64(d.Minute)<<8|uint64(d.Second))
			b = binary.AppendUvarint(b, uint64(d.Microsecond))
		case codec.KindDuration:
			b = binary.AppendVarint(b, v.Duration().Micros)
		case codec.KindBytes, codec.KindDecimal:
			b = binary.AppendUvarint(b, uint64(len(v.Bytes())))
			b = append(b, v.Bytes()...)
		case codec.KindString:
			if !binaryCollation(c) {
				return b, false
			}
			p := v.Bytes()
			if t.s.d == MySQL {
				// PAD SPACE: 'a' and 'a ' are one key to MySQL, two
				// to SQLite and PostgreSQL, which compare every byte.
				p = bytes.TrimRight(p, " ")
			}
			b = binary.AppendUvarint(b, uint64(len(p)))
			b = append(b, p...)
		default: // NULL, floats, JSON
			return b, false
		}
	}
	// A key of the same columns but more of them is another shape.
	if len(codec.KeyColumns(img)) != len(key0) {
		return b, false
	}
	return b, true
}

// binaryCollation reports whether a string column compares by bytes.
func binaryCollation(c *codec.Column) bool {
	return c.Collation == "binary" || strings.HasSuffix(c.Collation, "_bin") || c.Flags.Has(codec.FlagBinary)
}

// sameUpsertShape reports whether two images upsert the same columns, so
// that they can share a multi-row statement.
func sameUpsertShape(a, b []codec.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Flags.Has(codec.FlagGenerated) != b[i].Flags.Has(codec.FlagGenerated) {
			return false
		}
	}
	return true
}

// sameKeyShape reports whether two images have the same key columns, so that
// their deletes can share a statement. Images without a key never share.
func sameKeyShape(a, b []codec.Column) bool {
	ka, kb := codec.KeyColumns(a), codec.KeyColumns(b)
	if ka == nil || len(ka) != len(kb) {
		return false
	}
	for i := range ka {
		if a[ka[i]].Name != b[kb[i]].Name {
			return false
		}
	}
	return true
}

// ApplyRows writes rows as multi-row REPLACE and DELETE statements: runs of
// consecutive ops of one kind and shape share a statement, up to
// MaxStatementRows rows and the dialect's placeholder and size limits.
func (t *sqlTx) ApplyRows(ctx context.Context, table apply.Table, rows []*codec.RowChange) error {
	t.ops = plan(t.ops[:0], rows)
	t.collapse()
	t.freshFirst()
	err := t.execOps(ctx, table, t.ops, t.collapsed)
	clear(t.ops) // drop the references to Run's rows
	return err
}

// execOps writes ops in order, runs of one kind and shape sharing a
// statement. collapsed says that ops hold at most one op per key. The
// upserts of a table with unique keys besides its key may go by units,
// each cleared first (see units).
func (t *sqlTx) execOps(ctx context.Context, table apply.Table, ops []rowOp, collapsed bool) error {
	if len(ops) == 0 {
		return nil
	}
	if err := t.learnKeyless(ctx, table, ops[0].img); err != nil {
		return err
	}
	units, err := t.units(ctx, table, ops)
	if err != nil {
		return err
	}
	unit := 0        // with units: the upserts at the head of ops left of the current unit
	cleared := false // with units: clearUnit deleted the rows of the current unit's keys
	upserts := 0     // ops at the head that go by upserts after their COPY failed
	for len(ops) > 0 {
		limit := len(ops)
		if units && !ops[0].del {
			if unit == 0 {
				if unit, cleared, err = t.clearUnit(ctx, table, ops, collapsed); err != nil {
					return err
				}
			}
			limit = unit // a statement never reaches into the next unit
		}
		if upserts == 0 {
			k, ci, err := t.copyRun(ctx, table, ops[:limit], collapsed)
			if err != nil {
				return err
			}
			if k > 0 {
				done, err := t.copyUpserts(ctx, table, ops[:k], ci)
				if err != nil {
					return err
				}
				if done {
					ops = ops[k:]
					if unit > 0 {
						unit -= k
					}
					continue
				}
				upserts = k
			}
		}
		n := 1
		for n < limit && n < t.s.o.MaxStatementRows && ops[n].del == ops[0].del {
			if ops[0].del && !sameKeyShape(ops[0].img, ops[n].img) ||
				!ops[0].del && !sameUpsertShape(ops[0].img, ops[n].img) {
				break
			}
			// PostgreSQL refuses an upsert that meets one row twice: unless
			// collapse left one op per key, a statement ends before a key
			// it holds comes again (a row changed at two commit ts, or a
			// change the log holds twice). A table without a key has no
			// ON CONFLICT: its identical rows share a statement.
			if t.s.d == Postgres && !collapsed && !ops[0].del && codec.KeyColumns(ops[0].img) != nil && t.seenKey(ops[n], n == 1, ops[0]) {
				break
			}
			n++
		}
		var err error
		if ops[0].del {
			n, err = t.delete(ctx, table, ops[:n])
		} else {
			n, err = t.upsert(ctx, table, ops[:n], units && cleared)
		}
		if err != nil {
			return err
		}
		ops = ops[n:]
		if unit > 0 {
			unit -= n
		}
		upserts = max(0, upserts-n)
	}
	return nil
}

// ApplyGroup applies the row changes of several tables at one commit ts
// (one upstream transaction), for a downstream that checks foreign keys
// (apply.GroupApplier): every delete first, children before their parents,
// then every upsert, parents before their children, by the foreign keys
// the downstream's catalog declares. A log keeps no order of the tables
// inside a transaction, so this is the order the checks accept whatever
// order the rows came in. What no order of tables serves — a table
// referencing itself, a cycle of foreign keys, a parent whose rows change
// while its children are written — MySQL and SQLite apply with the checks
// deferred to the end of the transaction (see fkdefer.go); on PostgreSQL,
// which checks at the end of each statement, it fails on the check, naming
// the statement.
func (t *sqlTx) ApplyGroup(ctx context.Context, groups []apply.TableRows) error {
	graph, err := t.s.foreignKeys(ctx, t.ex)
	if err != nil {
		return err
	}
	order := parentsFirst(groups, graph, t.s.d == SQLite)
	type planned struct {
		table     apply.Table
		ops       []rowOp
		collapsed bool
		split     int // ops[:split] are the deletes
	}
	plans := make([]planned, len(order))
	for i, g := range order {
		t.ops = plan(t.ops[:0], g.Rows)
		t.collapse()
		ops := slices.Clone(t.ops)
		// Deletes first, each kind in its order: the collapse and the
		// plan keep each commit ts's deletes before its upserts, and a
		// group is one commit ts.
		slices.SortStableFunc(ops, func(a, b rowOp) int {
			switch {
			case a.del == b.del:
				return 0
			case a.del:
				return -1
			}
			return 1
		})
		split := 0
		for split < len(ops) && ops[split].del {
			split++
		}
		plans[i] = planned{g.Table, ops, t.collapsed, split}
	}
	clear(t.ops)
	deferred := t.s.o.ForeignKeyChecks && t.s.d != Postgres && deferral(groups, graph, t.s.d == SQLite)
	if deferred {
		if err := t.deferChecks(ctx); err != nil {
			return err
		}
	}
	err = func() error {
		for i := len(plans) - 1; i >= 0; i-- { // children first
			if err := t.execOps(ctx, plans[i].table, plans[i].ops[:plans[i].split], plans[i].collapsed); err != nil {
				return err
			}
		}
		for _, p := range plans { // parents first
			if err := t.execOps(ctx, p.table, p.ops[p.split:], p.collapsed); err != nil {
				return err
			}
		}
		return nil
	}()
	if deferred && err == nil {
		err = t.endDeferral(ctx, groups)
	}
	return err
}

// parentsFirst orders groups so that a table comes after every table it
// references (graph: child → parents), keeping the given order where the
// keys say nothing; a cycle keeps its tables in the given order. byName
// matches tables by name alone (SQLite has one namespace).
func parentsFirst(groups []apply.TableRows, graph map[apply.Table][]apply.Table, byName bool) []apply.TableRows {
	key := func(t apply.Table) apply.Table {
		if byName {
			return apply.Table{Name: strings.ToLower(t.Name)}
		}
		return t
	}
	index := map[apply.Table]int{}
	for i, g := range groups {
		index[key(g.Table)] = i
	}
	state := make([]uint8, len(groups)) // 0 new, 1 on the path, 2 placed
	out := make([]apply.TableRows, 0, len(groups))
	var visit func(i int)
	visit = func(i int) {
		if state[i] != 0 {
			return // placed, or a cycle: leave it where the path is
		}
		state[i] = 1
		for _, p := range graph[key(groups[i].Table)] {
			if j, ok := index[key(p)]; ok && j != i {
				visit(j)
			}
		}
		state[i] = 2
		out = append(out, groups[i])
	}
	for i := range groups {
		visit(i)
	}
	return out
}

// seenKey reports whether op's key is one the statement being grouped holds
// already; first starts a new statement, whose first op is op0. Keys compare
// by their values' text: PostgreSQL's deterministic collations compare text
// by bytes, and a key that is equal only by the server's rules (1.5 and 1.50
// in a numeric key) fails the statement loudly rather than silently.
func (t *sqlTx) seenKey(op rowOp, first bool, op0 rowOp) bool {
	if first {
		if t.last == nil {
			t.last = map[string]int{}
		}
		clear(t.last)
		t.last[t.keyText(op0.img)] = 0
	}
	k := t.keyText(op.img)
	if _, ok := t.last[k]; ok {
		return true
	}
	t.last[k] = 0
	return false
}

// keyText is the text of img's key values, NUL-separated with each value's
// kind.
func (t *sqlTx) keyText(img []codec.Column) string {
	b := t.kb[:0]
	for _, i := range codec.KeyColumns(img) {
		v := img[i].Value
		b = append(b, byte(v.Kind()))
		b = append(b, v.String()...)
		b = append(b, 0)
	}
	t.kb = b
	return string(b)
}

// exec runs the statement in t.buf with t.args, naming the table, the ts
// range and the SQL (as shown by shown) when it fails. It returns the rows
// the statement affected; a dry run prints the statement and affects none.
func (t *sqlTx) exec(ctx context.Context, table apply.Table, ops []rowOp, shown func() string) (int64, error) {
	if w := t.s.o.DryRun; w != nil {
		return 0, t.s.dryRun(w, string(t.buf), t.args)
	}
	var res sql.Result
	var err error
	if t.lite != nil {
		var st *sql.Stmt
		if st, err = t.lite.stmt(ctx, t.buf); err == nil {
			res, err = st.ExecContext(ctx, t.args...)
		}
	} else {
		res, err = t.ex.ExecContext(ctx, t.query(table), t.args...)
	}
	if err != nil {
		first, last := ops[0].ts, ops[0].ts
		for _, op := range ops {
			first, last = min(first, op.ts), max(last, op.ts)
		}
		return 0, &apply.StatementError{Table: table, FirstTs: first, LastTs: last, SQL: shown(), Err: t.s.d.classify(err)}
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("apply: table %s: rows affected: %w", table, err)
	}
	return n, nil
}

// upsert writes a prefix of ops (all upserts of one shape) as one statement
// and returns how many it wrote. Each row is inserted, or, where a row holds
// its key (or another unique key) already, that row is updated in place:
//
//	MySQL:      INSERT INTO `s`.`t` (`a`,`b`) VALUES (?,?),(?,?) ON DUPLICATE KEY UPDATE `a`=VALUES(`a`),`b`=VALUES(`b`)
//	SQLite:     INSERT INTO "t" ("a","b") VALUES (?,?),(?,?) ON CONFLICT DO UPDATE SET "a"=excluded."a","b"=excluded."b"
//	            (ON CONFLICT ("a") where the table has another unique key)
//	PostgreSQL: INSERT INTO "s"."t" ("a","b") VALUES ($1,$2),($3,$4) ON CONFLICT ("a") DO UPDATE SET "a"=EXCLUDED."a","b"=EXCLUDED."b"
//
// An update in place deletes nothing, so no ON DELETE action of a foreign
// key fires (REPLACE, a delete and an insert, would cascade into the
// children of a parent whose other columns changed). A row whose new image
// meets a row that is not its own on another unique key — a stale row,
// which happens only where the replay overlaps changes already downstream
// (unique values moving between the rows a transaction changes are no such
// conflict: see units) — fails with a duplicate-key error; on MySQL, which
// cannot name a conflict target, only where the row also meets its own key
// row, else the upsert updates the stale row into it in place, uncounted
// (with foreign-key checks on, SQLite's does too). The sink then
// writes the statement's rows again with REPLACE semantics, the stale row
// deleted and the row written, counting each row that needed it
// (Conflicts.Replaced): MySQL and SQLite row by row, with REPLACE (MySQL) or
// INSERT OR REPLACE (SQLite) where the upsert fails; PostgreSQL, where a
// failed statement aborts the transaction, runs the statements of a table
// with such a key under a savepoint, and after a failure deletes, row by
// row, the rows outside the row's key that hold one of its unique values,
// then writes the statement again. That delete fires no foreign-key action
// while the checks are off (the default); with
// SinkOptions.ForeignKeyChecks the error stands, naming the table. Generated
// columns are left out.
//
// cleared says the rows of ops' keys were deleted first (clearUnit): a
// MySQL upsert that still updated a row in place met a stale one, which is
// counted.
//
// Inserts into a table without a key are checked for identical rows first
// where the downstream may hold rows the progress does not account for (see
// keyless.go).
func (t *sqlTx) upsert(ctx context.Context, table apply.Table, ops []rowOp, cleared bool) (int, error) {
	d := t.s.d
	guard := false
	if d == Postgres && t.s.o.DryRun == nil && !t.s.o.ForeignKeyChecks {
		var err error
		if guard, _, err = t.otherUnique(ctx, table, ops[0].img); err != nil {
			return 0, err
		}
	}
	t.keyTarget = false
	if d == SQLite && t.s.o.DryRun == nil && !t.s.o.ForeignKeyChecks && codec.KeyColumns(ops[0].img) != nil {
		other, backed, err := t.otherUnique(ctx, table, ops[0].img)
		if err != nil {
			return 0, err
		}
		t.keyTarget = other && backed
	}
	n, head, err := t.buildUpsert(table, ops, false)
	if err != nil {
		return 0, err
	}
	if err := t.keylessDuplicates(ctx, table, ops[:n]); err != nil {
		return 0, err
	}
	if guard {
		if err := t.savepoint(ctx, "SAVEPOINT redokit_upsert"); err != nil {
			return 0, err
		}
	}
	affected, err := t.exec(ctx, table, ops[:n], func() string { return shownRows(t.buf, head, n) })
	if err == nil {
		if d == MySQL && cleared && affected > int64(n) {
			// MySQL counts 1 a row inserted and 2 a row updated; in a
			// cleared unit no row held the keys, so each update was of
			// a stale row holding another unique value, made the row.
			t.conflicts.Add(table, affected-int64(n), 0, 0)
		}
		if guard {
			err = t.savepoint(ctx, "RELEASE SAVEPOINT redokit_upsert")
		}
		return n, err
	}
	if !d.duplicateKey(err) {
		return n, err
	}
	if t.s.o.ForeignKeyChecks {
		return n, explain(err, "another row holds a unique value this statement writes: a unique value moving between rows of a table a foreign key references "+
			"(with foreign-key checks on, the sink writes such a table as is), or a row not the log's (the downstream ran past the log's checkpoint, or diverged); "+
			"with foreign-key checks on, the sink does not delete that row to write this one, REPLACE-style (its children could cascade or dangle)")
	}
	if d == Postgres {
		if !guard {
			return n, err
		}
		if err := t.savepoint(ctx, "ROLLBACK TO SAVEPOINT redokit_upsert"); err != nil {
			return n, err
		}
		return n, t.pgReplace(ctx, table, ops[:n])
	}
	for i := range ops[:n] {
		one := ops[i : i+1]
		_, err := t.writeUpsert(ctx, table, one, false)
		if err == nil {
			continue
		}
		if !d.duplicateKey(err) {
			return n, err
		}
		if _, err := t.writeUpsert(ctx, table, one, true); err != nil {
			return n, err
		}
		t.conflicts.Add(table, 1, 0, 0)
	}
	return n, nil
}

// savepoint runs a SAVEPOINT statement of upsert's.
func (t *sqlTx) savepoint(ctx context.Context, q string) error {
	if _, err := t.ex.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("apply: %s: %s: %w", t.s.name, q, t.s.d.classify(err))
	}
	return nil
}

// explain adds why to the error of a failed statement.
func explain(err error, why string) error {
	var se *apply.StatementError
	if errors.As(err, &se) {
		se.Err = fmt.Errorf("%w (%s)", se.Err, why)
		return err
	}
	return fmt.Errorf("%w (%s)", err, why)
}

// pgReplace writes ops, whose statement failed on a unique key, with REPLACE
// semantics on PostgreSQL: for each row, it deletes the rows that hold one
// of its unique values and are not the row of its key (counting the row as
// replaced when it deleted one), then writes the rows again as upserts.
//
//	DELETE FROM "s"."t" WHERE (("u" = $1) OR ("v" = $2 AND "w" = $3)) AND NOT ("id" = $4)
//
// Two of ops may themselves meet on a unique value: in a part of a commit ts
// (apply.CommitTsSplitter), a row as an earlier commit ts of the call left
// it and a row taking its value at the last one, whose change moving the
// first away comes in a later call. The statement then fails again, and the
// rows go one at a time, in their order, each after the delete of the rows
// holding its values: the later image replaces the earlier, as applying the
// log in order would, and the later call writes the first row back.
//
// A unique index on an expression or with a predicate cannot be matched by
// columns: a row holding a value of it is left, and the upsert fails again,
// naming the table.
func (t *sqlTx) pgReplace(ctx context.Context, table apply.Table, ops []rowOp) error {
	idx, err := t.uniqueIndexes(ctx, table)
	if err != nil {
		return err
	}
	opaque := ""
	for _, u := range idx {
		if !u.plain {
			opaque = u.name
		}
	}
	named := func(err error) error {
		if opaque != "" && t.s.d.duplicateKey(err) {
			err = explain(err, fmt.Sprintf("a row not the log's holds a value of unique index %s, on an expression or partial: the sink cannot tell which row to replace", opaque))
		}
		return err
	}
	for i := range ops {
		if err := t.deleteHolders(ctx, table, idx, &ops[i]); err != nil {
			return err
		}
	}
	apart := len(ops) > 1
	if apart {
		if err := t.savepoint(ctx, "SAVEPOINT redokit_replace"); err != nil {
			return err
		}
	}
	for rest := ops; len(rest) > 0; {
		n, err := t.writeUpsert(ctx, table, rest, false)
		if err != nil {
			if !apart || !t.s.d.duplicateKey(err) {
				return named(err)
			}
			if err := t.savepoint(ctx, "ROLLBACK TO SAVEPOINT redokit_replace"); err != nil {
				return err
			}
			for i := range ops {
				if err := t.deleteHolders(ctx, table, idx, &ops[i]); err != nil {
					return err
				}
				if _, err := t.writeUpsert(ctx, table, ops[i:i+1], false); err != nil {
					return named(err)
				}
			}
			break
		}
		rest = rest[n:]
	}
	if apart {
		return t.savepoint(ctx, "RELEASE SAVEPOINT redokit_replace")
	}
	return nil
}

// deleteHolders deletes the rows outside op's key that hold one of its
// values of the plain unique indexes idx, counting op as replaced
// (Conflicts.Replaced) when it deleted one (see pgReplace).
func (t *sqlTx) deleteHolders(ctx context.Context, table apply.Table, idx []uniqueIndex, op *rowOp) error {
	img := op.img
	key := codec.KeyColumns(img)
	b := append(t.cbuf[:0], "DELETE FROM "...)
	b = t.s.d.table(b, table)
	b = append(b, " WHERE ("...)
	args := t.cargs[:0]
	defer func() { clear(t.cargs) }()
	conds := 0
index:
	for _, u := range idx {
		if !u.plain {
			continue
		}
		at := make([]int, len(u.cols))
		for j, c := range u.cols {
			if at[j] = columnIndex(img, c); at[j] < 0 || img[at[j]].Value.IsNull() {
				continue index // a NULL conflicts with nothing
			}
		}
		if conds > 0 {
			b = append(b, " OR "...)
		}
		b = append(b, '(')
		for j, k := range at {
			if j > 0 {
				b = append(b, " AND "...)
			}
			b, args = t.condArgs(b, args, &img[k])
		}
		b = append(b, ')')
		conds++
	}
	b = append(b, ')')
	if conds == 0 {
		return nil
	}
	if key != nil {
		b = append(b, " AND NOT ("...)
		for j, k := range key {
			if j > 0 {
				b = append(b, " AND "...)
			}
			b, args = t.condArgs(b, args, &img[k])
		}
		b = append(b, ')')
	}
	t.cbuf, t.cargs = b, args
	res, err := t.ex.ExecContext(ctx, t.text(table, b), args...)
	if err != nil {
		return &apply.StatementError{Table: table, FirstTs: op.ts, LastTs: op.ts, SQL: string(b), Err: t.s.d.classify(err)}
	}
	if n, err := res.RowsAffected(); err == nil && n > 0 {
		t.conflicts.Add(table, 1, 0, 0)
	}
	return nil
}

// writeUpsert builds and runs the statement of a prefix of ops (see
// buildUpsert), and returns how many rows it wrote.
func (t *sqlTx) writeUpsert(ctx context.Context, table apply.Table, ops []rowOp, replace bool) (int, error) {
	n, head, err := t.buildUpsert(table, ops, replace)
	if err != nil {
		return 0, err
	}
	_, err = t.exec(ctx, table, ops[:n], func() string { return shownRows(t.buf, head, n) })
	return n, err
}

// buildUpsert writes into t.buf and t.args the statement of a prefix of ops:
// an upsert, or with replace a REPLACE (MySQL) or INSERT OR REPLACE
// (SQLite). It returns how many rows it holds and where its VALUES begin.
func (t *sqlTx) buildUpsert(table apply.Table, ops []rowOp, replace bool) (n, head int, err error) {
	d := t.s.d
	img := ops[0].img
	switch {
	case replace && d == MySQL:
		t.buf = append(t.buf[:0], "REPLACE INTO "...)
	case replace:
		t.buf = append(t.buf[:0], "INSERT OR REPLACE INTO "...)
	default:
		t.buf = append(t.buf[:0], "INSERT INTO "...)
	}
	t.buf = d.table(t.buf, table)
	t.buf = append(t.buf, " ("...)
	cols := 0
	for i := range img {
		if img[i].Flags.Has(codec.FlagGenerated) {
			continue
		}
		if cols > 0 {
			t.buf = append(t.buf, ',')
		}
		t.buf = d.quote(t.buf, img[i].Name)
		cols++
	}
	if cols == 0 {
		return 0, 0, &apply.StatementError{Table: table, FirstTs: ops[0].ts, LastTs: ops[0].ts,
			SQL: string(t.buf), Err: fmt.Errorf("row image has no column to write")}
	}
	t.buf = append(t.buf, ") VALUES "...)
	head = len(t.buf)
	maxRows := t.statementRows(len(ops), max(1, d.maxParams()/cols))
	t.args = t.args[:0]
	size := 0
	for n < maxRows && (n == 0 || t.lite != nil || size < maxStatementBytes) {
		if n > 0 {
			t.buf = append(t.buf, ',')
		}
		t.buf = append(t.buf, '(')
		k := 0
		for i := range ops[n].img {
			c := &ops[n].img[i]
			if c.Flags.Has(codec.FlagGenerated) {
				continue
			}
			if k > 0 {
				t.buf = append(t.buf, ',')
			}
			a := d.arg(c.Value)
			size += argSize(a)
			t.args = append(t.args, a)
			t.buf = d.param(t.buf, len(t.args))
			k++
		}
		t.buf = append(t.buf, ')')
		n++
	}
	if !replace {
		t.buf = t.onConflict(t.buf, img)
	}
	return n, head, nil
}

// onConflict appends the clause that turns an INSERT into an update in place
// of the row it conflicts with (see upsert).
func (t *sqlTx) onConflict(b []byte, img []codec.Column) []byte {
	d := t.s.d
	switch d {
	case MySQL:
		b = append(b, " ON DUPLICATE KEY UPDATE "...)
	case SQLite:
		// With no conflict target, SQLite (3.35 and later) updates the row
		// that conflicts on whichever unique key: a stale row holding only
		// another unique value of the row would become the row, uncounted.
		// Where the table has another unique key, the key is named, so
		// that such a row fails the statement and the fallback replaces
		// it, counted (see upsert).
		if t.keyTarget {
			b = append(b, " ON CONFLICT ("...)
			for i, k := range codec.KeyColumns(img) {
				if i > 0 {
					b = append(b, ',')
				}
				b = d.quote(b, img[k].Name)
			}
			b = append(b, ") DO UPDATE SET "...)
			break
		}
		b = append(b, " ON CONFLICT DO UPDATE SET "...)
	case Postgres:
		key := codec.KeyColumns(img)
		if key == nil {
			return b // a table without a key: nothing to conflict on
		}
		b = append(b, " ON CONFLICT ("...)
		for i, k := range key {
			if i > 0 {
				b = append(b, ',')
			}
			b = d.quote(b, img[k].Name)
		}
		b = append(b, ") DO UPDATE SET "...)
	}
	k := 0
	for i := range img {
		if img[i].Flags.Has(codec.FlagGenerated) {
			continue
		}
		if k > 0 {
			b = append(b, ',')
		}
		b = d.quote(b, img[i].Name)
		if d == MySQL {
			b = append(b, "=VALUES("...)
			b = d.quote(b, img[i].Name)
			b = append(b, ')')
		} else {
			b = append(b, "=excluded."...)
			b = d.quote(b, img[i].Name)
		}
		k++
	}
	return b
}

// statementRows is how many of n rows the next statement takes, at most
// limit. SQLite's statements take a power of two: they are kept prepared
// (see sqliteSession), and these few sizes per shape make every statement
// one that comes again; n rows take at most log2(n)+1 statements. MySQL's
// take all they can: each is one round trip, with the values interpolated.
func (t *sqlTx) statementRows(n, limit int) int {
	n = min(n, limit)
	if t.lite != nil {
		n = 1 << (bits.Len(uint(n)) - 1)
	}
	return n
}

// shownRows is the SQL of a multi-row statement with its first row of
// placeholders only, and the row count.
func shownRows(b []byte, head, n int) string {
	end := head
	for end < len(b) && b[end] != ')' {
		end++
	}
	s := string(b[:min(end+1, len(b))])
	if n > 1 {
		s += " /* " + strconv.Itoa(n) + " rows */"
	}
	return s
}

// delete deletes a prefix of ops (all deletes of one key shape) with one
// statement and returns how many it deleted. A delete that matched no row
// is counted (Conflicts.DeletesMissed).
//
//	one key column:   DELETE FROM t WHERE `k` IN (?,?,?)
//	several:          DELETE FROM t WHERE (`a` = ? AND `b` = ?) OR (`a` = ? AND `b` = ?)
//	no key (one row): DELETE FROM t WHERE `a` = ? AND `b` IS NULL LIMIT 1 (MySQL)
//	                  DELETE FROM "t" WHERE rowid = (SELECT rowid FROM "t" WHERE … LIMIT 1) (SQLite)
//	                  DELETE FROM "s"."t" WHERE ctid = (SELECT ctid FROM "s"."t" WHERE … LIMIT 1) (PostgreSQL)
//
// A NULL key value matches with IS NULL.
func (t *sqlTx) delete(ctx context.Context, table apply.Table, ops []rowOp) (int, error) {
	d := t.s.d
	t.buf = append(t.buf[:0], "DELETE FROM "...)
	t.buf = d.table(t.buf, table)
	t.buf = append(t.buf, " WHERE "...)
	t.args = t.args[:0]
	key := codec.KeyColumns(ops[0].img)
	if key == nil {
		// Without a key, match every column exactly (floats and JSON too:
		// rows may differ in nothing else), and delete one row: identical
		// rows are interchangeable. Generated columns are functions of the
		// others and add nothing.
		switch d {
		case SQLite:
			t.buf = append(t.buf, "rowid = (SELECT rowid FROM "...)
		case Postgres:
			t.buf = append(t.buf, "ctid = (SELECT ctid FROM "...)
		}
		if d != MySQL {
			t.buf = d.table(t.buf, table)
			t.buf = append(t.buf, " WHERE "...)
		}
		n := 0
		for i := range ops[0].img {
			c := &ops[0].img[i]
			if c.Flags.Has(codec.FlagGenerated) {
				continue
			}
			if n > 0 {
				t.buf = append(t.buf, " AND "...)
			}
			t.buf, t.args = t.exactCondArgs(t.buf, t.args, c)
			n++
		}
		if n == 0 {
			t.buf = append(t.buf, "1 = 1"...)
		}
		t.buf = append(t.buf, " LIMIT 1"...)
		if d != MySQL {
			t.buf = append(t.buf, ')')
		}
		deleted, err := t.exec(ctx, table, ops[:1], func() string { return string(t.buf) })
		if err == nil && deleted == 0 && t.s.o.DryRun == nil {
			t.conflicts.Add(table, 0, 1, 0)
		}
		return 1, err
	}
	n := t.statementRows(len(ops), max(1, d.maxParams()/len(key)))
	single := len(key) == 1
	for _, op := range ops[:n] {
		if op.img[codec.KeyColumns(op.img)[0]].Value.IsNull() {
			single = false
		}
	}
	var head int
	if single {
		t.buf = d.quote(t.buf, ops[0].img[key[0]].Name)
		t.buf = append(t.buf, " IN ("...)
		head = len(t.buf)
		for i, op := range ops[:n] {
			if i > 0 {
				t.buf = append(t.buf, ',')
			}
			t.args = append(t.args, d.arg(op.img[key[0]].Value))
			t.buf = d.param(t.buf, len(t.args))
		}
		t.buf = append(t.buf, ')')
	} else {
		head = len(t.buf)
		for i, op := range ops[:n] {
			if i > 0 {
				t.buf = append(t.buf, " OR "...)
			}
			t.buf = append(t.buf, '(')
			for j, k := range codec.KeyColumns(op.img) {
				if j > 0 {
					t.buf = append(t.buf, " AND "...)
				}
				t.buf = t.cond(t.buf, &op.img[k])
			}
			t.buf = append(t.buf, ')')
		}
	}
	deleted, err := t.exec(ctx, table, ops[:n], func() string {
		if single {
			s := string(t.buf[:head]) + string(d.param(nil, 1)) + ")"
			if n > 1 {
				s += " /* " + strconv.Itoa(n) + " rows */"
			}
			return s
		}
		return shownRows(t.buf, head, n)
	})
	if err == nil && t.s.o.DryRun == nil {
		// A delete of a row the batch itself wrote and collapse folded
		// away may miss and is no conflict; counting it out can hide a
		// true miss of the same count, never invent one.
		expected := int64(n)
		for _, op := range ops[:n] {
			if op.madeHere {
				expected--
			}
		}
		if deleted < expected {
			t.conflicts.Add(table, 0, expected-deleted, 0)
		}
	}
	return n, err
}

// cond appends a condition that c's column holds exactly c's value: `c` = ?
// (binding the value into t.args) or `c` IS NULL (see condArgs).
func (t *sqlTx) cond(b []byte, c *codec.Column) []byte {
	b, t.args = t.condArgs(b, t.args, c)
	return b
}

// condArgs appends a condition that c's column holds exactly c's value:
// `c` = ? (binding the value into args) or `c` IS NULL. A JSON value
// compares as JSON on MySQL (CAST(? AS JSON)) and by its text on
// PostgreSQL, whose json type has no equality; MariaDB's JSON is text,
// compared by bytes.
func (t *sqlTx) condArgs(b []byte, args []any, c *codec.Column) ([]byte, []any) {
	d := t.s.d
	b = d.quote(b, c.Name)
	if c.Value.IsNull() {
		return append(b, " IS NULL"...), args
	}
	json := c.Value.Kind() == codec.KindJSON
	if json && d == Postgres {
		b = append(b, "::text"...)
	}
	b = append(b, " = "...)
	args = append(args, d.arg(c.Value))
	if json && d == MySQL && !t.s.mariaDB {
		b = append(b, "CAST("...)
		b = d.param(b, len(args))
		return append(b, " AS JSON)"...), args
	}
	return d.param(b, len(args)), args
}

// exactCondArgs is condArgs for matching a row of a table without a key,
// which must find the very row the image is, not one its collation deems
// equal: on MySQL a string compares by its bytes (CAST(`c` AS BINARY) =
// ?), or a delete of 'a' could delete a row holding 'A' (a case-insensitive
// collation) or 'a ' (PAD SPACE, which _bin collations have too). SQLite
// and PostgreSQL compare text by its bytes already.
//
// A float zero matches only a zero of its sign: -0 = 0 in SQL, and SQLite
// and PostgreSQL keep both (MariaDB stores -0 as 0): atan2(0, c) is pi for
// -0 and 0 for 0 on SQLite; PostgreSQL prints -0 as "-0".
func (t *sqlTx) exactCondArgs(b []byte, args []any, c *codec.Column) ([]byte, []any) {
	d := t.s.d
	if k := c.Value.Kind(); d != MySQL && (k == codec.KindFloat32 || k == codec.KindFloat64) {
		f := c.Value.Float64()
		if k == codec.KindFloat32 {
			f = float64(c.Value.Float32())
		}
		b, args = t.condArgs(b, args, c)
		if f != 0 {
			return b, args
		}
		neg := math.Signbit(f)
		switch d {
		case SQLite:
			b = append(b, " AND atan2(0, "...)
			b = d.quote(b, c.Name)
			if neg {
				return append(b, ") > 0"...), args
			}
			return append(b, ") = 0"...), args
		case Postgres:
			b = append(b, " AND "...)
			b = d.quote(b, c.Name)
			if neg {
				return append(b, "::text = '-0'"...), args
			}
			return append(b, "::text <> '-0'"...), args
		}
		return b, args
	}
	if d != MySQL || c.Value.Kind() != codec.KindString {
		return t.condArgs(b, args, c)
	}
	b = append(b, "CAST("...)
	b = t.s.d.quote(b, c.Name)
	b = append(b, " AS BINARY) = "...)
	args = append(args, t.s.d.arg(c.Value))
	return t.s.d.param(b, len(args)), args
}

// Commit records marks in the progress table and commits. A dry run rolls
// back: it wrote nothing.
func (t *sqlTx) Commit(ctx context.Context, marks []apply.Mark) error {
	if t.s.o.DryRun != nil {
		return t.Rollback()
	}
	if err := t.s.writeMarks(ctx, t.tx, marks, nil); err != nil {
		t.Rollback()
		return err
	}
	if t.guard != nil {
		t.guard.commit()
	}
	err := t.tx.Commit()
	t.release()
	if err != nil {
		err = t.s.d.classify(err)
		// Only a transient failure may hide a commit that landed (the
		// one apply checks with its progress); any other rolled back.
		if apply.IsTransient(err) {
			t.s.stashUnsure(marks, t.conflicts)
		}
		return fmt.Errorf("apply: commit: %w", err)
	}
	t.s.committed(marks, t.conflicts)
	return nil
}

// Rollback abandons the transaction.
func (t *sqlTx) Rollback() error {
	err := t.tx.Rollback()
	t.release()
	return err
}

// release gives the connection and scratch memory of a finished
// transaction back to the sink.
func (t *sqlTx) release() {
	t.giveScratch()
	if t.conn != nil {
		t.conn.Close()
		t.conn = nil
	}
	if t.guard != nil {
		t.guard.release()
		t.guard = nil
	}
}
