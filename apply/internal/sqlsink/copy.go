package sqlsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// On PostgreSQL, a run of fresh inserts (rowOp.fresh) goes by COPY FROM
// STDIN rather than by INSERT … ON CONFLICT DO UPDATE: the server spends a
// quarter of the upsert's time on a row that COPY loads, the client a
// fifth. COPY only inserts, so it is tried under a savepoint, and whatever
// it fails on — a row already downstream (the downstream ran ahead, a
// resumed apply), a stale row holding a unique value, a value the column
// refuses — the savepoint undoes it and the upserts write the same rows as
// they would have without it: the same rows, the same conflicts counted,
// the same error. A COPY that succeeds inserted every row and met no row
// holding any of their unique values, which is what the upserts would have
// done.
//
// The data goes in COPY's text format, each field the text the column's
// input function reads, as a text parameter of the upsert is read; a value
// the upsert binds in binary (an integer, a float, a byte string) goes by
// COPY only into a column whose type reads its text exactly as pgx encodes
// the binary: integers into integer and numeric columns, finite floats into
// real and double precision (a float into real rounded as pgx rounds it),
// byte strings into bytea. Any other pair, a text holding a NUL (the
// documented refusal, which the upsert then names), a table with rules (COPY
// ignores them), or an ON CONFLICT key no unique index backs (the upsert
// fails on it) leaves the rows to the upserts. (COPY's binary format was
// measured on the insert-heavy benchmark cell, and dropped: the server
// spent more CPU receiving it than reading the text, 3.0–3.4 against
// 2.6–2.8 s of the machine's CPU for 600,000 rows.)
// Foreign-key checks on (SinkOptions.ForeignKeyChecks), a dry run, and a
// table without a key whose inserts are checked for duplicates (keyless.go)
// write no COPY.

// PostgreSQL type OIDs whose input reads a binary-bound value's text
// exactly (pg_type.dat).
const (
	oidBytea   = 17
	oidInt8    = 20
	oidInt2    = 21
	oidInt4    = 23
	oidFloat4  = 700
	oidFloat8  = 701
	oidNumeric = 1700
)

// minCopyRows is the fewest rows that go by COPY: a COPY takes three round
// trips with its savepoint, an upsert one. SetMinCopyRows changes it.
var minCopyRows atomic.Int64

func init() { minCopyRows.Store(defaultMinCopyRows) }

const defaultMinCopyRows = 32

// SetMinCopyRows sets the fewest rows of a table's batch that go by COPY on
// PostgreSQL (0: the default, 32), and returns the previous setting: the
// differential fuzzer sends even one row by COPY in half of its histories,
// whose batches are small.
func SetMinCopyRows(n int) int {
	if n <= 0 {
		n = defaultMinCopyRows
	}
	return int(minCopyRows.Swap(int64(n)))
}

// copySkips is how many runs of a table go by upserts after its COPY
// failed: a replay over a downstream that ran ahead fails every COPY until
// it passes the rows there, and each failure costs the COPY again.
const copySkips = 16

// copyInfo is what COPY needs to know of a downstream table (see above).
type copyInfo struct {
	ok    bool              // COPY may write the table: it exists and has no rules
	types map[string]uint32 // column → type OID
	keys  [][]string        // the sorted columns of each plain unique index
	skip  int               // runs left to go by upserts after a failed COPY
}

// copyTable returns what the sink knows of table for COPY, read from the
// catalog once, and again after a DDL of it (see afterDDL).
func (t *sqlTx) copyTable(ctx context.Context, table apply.Table) (*copyInfo, error) {
	s := t.s
	s.cat.mu.Lock()
	ci, ok := s.cat.copy[table]
	s.cat.mu.Unlock()
	if ok {
		return ci, nil
	}
	q, ok := t.ex.(Queryer)
	if !ok {
		return nil, fmt.Errorf("apply: %s: no way to read the columns of %s", s.name, table)
	}
	ci = &copyInfo{types: map[string]uint32{}}
	rows, err := q.QueryContext(ctx, `SELECT a.attname, a.atttypid::int8, c.relhasrules FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.oid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
		string(s.d.table(nil, table)))
	if err != nil {
		return nil, fmt.Errorf("apply: %s: read the columns of %s: %w", s.name, table, s.d.classify(err))
	}
	rules := false
	for rows.Next() {
		var name string
		var oid int64
		var r bool
		if err := rows.Scan(&name, &oid, &r); err != nil {
			rows.Close()
			return nil, fmt.Errorf("apply: %s: read the columns of %s: %w", s.name, table, err)
		}
		ci.types[name] = uint32(oid)
		rules = rules || r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("apply: %s: read the columns of %s: %w", s.name, table, s.d.classify(err))
	}
	ci.ok = len(ci.types) > 0 && !rules
	idx, err := t.uniqueIndexes(ctx, table)
	if err != nil {
		return nil, err
	}
	for _, u := range idx {
		if u.plain {
			ci.keys = append(ci.keys, slices.Sorted(slices.Values(u.cols)))
		}
	}
	s.cat.mu.Lock()
	if s.cat.copy == nil {
		s.cat.copy = map[apply.Table]*copyInfo{}
	}
	s.cat.copy[table] = ci
	s.cat.mu.Unlock()
	return ci, nil
}

// copyRun returns how many of the upserts at the head of ops (the first
// limit) one COPY writes, 0 when they go by upserts (see above): fresh
// inserts of one shape, no key twice unless collapsed, at most maxCopyRows.
func (t *sqlTx) copyRun(ctx context.Context, table apply.Table, ops []rowOp, collapsed bool) (int, *copyInfo, error) {
	s := t.s
	if s.d != Postgres || t.conn == nil || s.o.DryRun != nil || s.o.ForeignKeyChecks ||
		drivers[s.d] == nil || drivers[s.d].CopyFrom == nil || ops[0].del || !ops[0].fresh {
		return 0, nil, nil
	}
	img := ops[0].img
	key := codec.KeyColumns(img)
	n := 1
	for n < len(ops) && n < maxCopyRows && !ops[n].del && ops[n].fresh && sameUpsertShape(img, ops[n].img) {
		if !collapsed && key != nil && t.seenKey(ops[n], n == 1, ops[0]) {
			break
		}
		n++
	}
	if int64(n) < minCopyRows.Load() {
		return 0, nil, nil
	}
	if key == nil && t.keylessChecked(table) {
		return 0, nil, nil
	}
	ci, err := t.copyTable(ctx, table)
	if err != nil || !ci.ok {
		return 0, nil, err
	}
	s.cat.mu.Lock()
	skip := ci.skip > 0
	if skip {
		ci.skip--
	}
	s.cat.mu.Unlock()
	if skip {
		return 0, nil, nil
	}
	if key != nil {
		// ON CONFLICT (key) needs a unique index of exactly the key.
		var names []string
		for _, k := range key {
			names = append(names, img[k].Name)
		}
		slices.Sort(names)
		if !slices.ContainsFunc(ci.keys, func(u []string) bool { return slices.Equal(u, names) }) {
			return 0, nil, nil
		}
	}
	return n, ci, nil
}

// freshFirst moves, where COPY may write them, the fresh inserts of a
// collapsed batch before its other upserts, keeping each kind's order, so
// that they make one run for COPY rather than runs cut short by updates.
// A collapsed batch holds one op per key, deletes first: its upserts meet
// no row of each other's keys, and those of a table with another unique
// key go as one unit, cleared first (see units).
//
// The fresh inserts of the batch's last commit ts stay after the other
// upserts of earlier ones. That commit ts may be a part
// (apply.CommitTsSplitter): an insert of it may take a unique value from a
// row as an earlier commit ts of the batch left it, a row whose change
// giving the value up comes in a later call. Written in commit-ts order,
// the insert replaces that row (pgReplace), and the later call writes it
// back; written first, the insert would be the one replaced, and nothing
// would write it back. An insert of an earlier commit ts meets no such row:
// its commit ts ends in the batch, where the log's rows hold their unique
// values alone.
func (t *sqlTx) freshFirst() {
	s := t.s
	if !t.collapsed || s.d != Postgres || t.conn == nil || s.o.DryRun != nil || s.o.ForeignKeyChecks {
		return
	}
	i := 0
	for i < len(t.ops) && t.ops[i].del {
		i++
	}
	var last uint64
	for _, op := range t.ops[i:] {
		last = max(last, op.ts)
	}
	rank := func(op rowOp) int {
		r := 0
		if op.ts == last {
			r = 2
		}
		if !op.fresh {
			r++
		}
		return r
	}
	slices.SortStableFunc(t.ops[i:], func(a, b rowOp) int { return rank(a) - rank(b) })
}

// maxCopyRows bounds the rows of one COPY, and so the buffer its data is
// built in.
const maxCopyRows = 1 << 14

// copyUpserts writes ops, fresh inserts of one shape, by one COPY under a
// savepoint, and reports whether it did; when not, nothing of it is left
// and the caller writes them by upserts. Rows whose values COPY cannot
// write as the upsert binds them are not tried.
func (t *sqlTx) copyUpserts(ctx context.Context, table apply.Table, ops []rowOp, ci *copyInfo) (bool, error) {
	d := t.s.d
	img := ops[0].img
	b := append(t.cbuf[:0], "COPY "...)
	b = d.table(b, table)
	b = append(b, " ("...)
	var oids []uint32
	for i := range img {
		if img[i].Flags.Has(codec.FlagGenerated) {
			continue
		}
		oid, ok := ci.types[img[i].Name]
		if !ok {
			return false, nil // the upsert names the missing column
		}
		if len(oids) > 0 {
			b = append(b, ',')
		}
		b = d.quote(b, img[i].Name)
		oids = append(oids, oid)
	}
	if len(oids) == 0 {
		return false, nil
	}
	b = append(b, ") FROM STDIN"...)
	query := string(b)
	data, ok := appendCopyRows(t.buf[:0], ops, oids)
	t.buf = data
	if !ok {
		return false, nil
	}
	if err := t.savepoint(ctx, "SAVEPOINT redokit_copy"); err != nil {
		return false, err
	}
	var n int64
	err := t.conn.Raw(func(dc any) error {
		var err error
		n, err = drivers[d].CopyFrom(ctx, dc, query, bytes.NewReader(data))
		return err
	})
	if err == nil && n != int64(len(ops)) {
		err = fmt.Errorf("copied %d rows of %d", n, len(ops))
	}
	if err == nil {
		copies.Add(1)
		return true, t.savepoint(ctx, "RELEASE SAVEPOINT redokit_copy")
	}
	if _, rerr := t.ex.ExecContext(ctx, "ROLLBACK TO SAVEPOINT redokit_copy"); rerr != nil {
		// The connection is gone, or the context: the COPY's error says
		// why.
		first, last := ops[0].ts, ops[0].ts
		for _, op := range ops {
			first, last = min(first, op.ts), max(last, op.ts)
		}
		return false, &apply.StatementError{Table: table, FirstTs: first, LastTs: last, SQL: query,
			Err: d.classify(errors.Join(err, rerr))}
	}
	t.s.cat.mu.Lock()
	ci.skip = copySkips
	t.s.cat.mu.Unlock()
	copyFallbacks.Add(1)
	return false, t.savepoint(ctx, "RELEASE SAVEPOINT redokit_copy")
}

// appendCopyRows appends the data of ops (fresh inserts of one shape, into
// columns of types oids, generated columns left out) in COPY's text
// format, or reports false when a value does not go by COPY (see above).
func appendCopyRows(b []byte, ops []rowOp, oids []uint32) ([]byte, bool) {
	for _, op := range ops {
		k := 0
		for i := range op.img {
			c := &op.img[i]
			if c.Flags.Has(codec.FlagGenerated) {
				continue
			}
			if k > 0 {
				b = append(b, '\t')
			}
			var ok bool
			if b, ok = appendCopyValue(b, c.Value, oids[k]); !ok {
				return b, false
			}
			k++
		}
		b = append(b, '\n')
	}
	return b, true
}

// appendCopyValue is appendCopyField(b, Postgres.arg(v), oid) without
// the argument's allocation: each kind goes the way arg binds it.
func appendCopyValue(b []byte, v codec.Value, oid uint32) ([]byte, bool) {
	switch v.Kind() {
	case codec.KindNull:
		return append(b, `\N`...), true
	case codec.KindInt:
		return appendCopyInt(b, v.Int(), oid)
	case codec.KindUint, codec.KindBit, codec.KindEnum, codec.KindSet:
		u := v.Uint()
		if u > math.MaxInt64 {
			return strconv.AppendUint(b, u, 10), true // arg's decimal text, which needs no escape
		}
		return appendCopyInt(b, int64(u), oid)
	case codec.KindYear:
		return appendCopyInt(b, int64(v.Year()), oid)
	case codec.KindDecimal, codec.KindString, codec.KindJSON:
		return appendCopyText(b, v.Bytes())
	case codec.KindFloat32:
		return appendCopyField(b, float64(v.Float32()), oid)
	case codec.KindFloat64:
		return appendCopyField(b, v.Float64(), oid)
	case codec.KindBytes:
		return appendCopyBytes(b, v.Bytes(), oid)
	}
	// Dates, times and durations bind as their text; an unknown kind as
	// its text too.
	return appendCopyField(b, Postgres.arg(v), oid)
}

func appendCopyInt(b []byte, x int64, oid uint32) ([]byte, bool) {
	switch oid {
	case oidInt2, oidInt4, oidInt8, oidNumeric:
		return strconv.AppendInt(b, x, 10), true
	}
	return b, false
}

// appendCopyText appends a text parameter's bytes with COPY's escapes.
func appendCopyText[T string | []byte](b []byte, x T) ([]byte, bool) {
	// A text parameter: the column's input function reads it, as COPY's
	// does once its escapes are undone. The bytes between escapes go in
	// one append each: most texts have none.
	start := 0
	for i := 0; i < len(x); i++ {
		i = plainRun(x, i)
		if i == len(x) {
			break
		}
		c := x[i]
		if !copyEscaped[c] {
			continue
		}
		b = append(b, x[start:i]...)
		start = i + 1
		switch c {
		case 0:
			return b, false
		case '\\':
			b = append(b, `\\`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		}
	}
	return append(b, x[start:]...), true
}

// copyEscaped marks the bytes appendCopyText does not copy as they are.
var copyEscaped = [256]bool{0: true, '\\': true, '\n': true, '\r': true, '\t': true}

// plainRun returns the index, from i on, of x's first byte below 0x20 or a
// backslash (every byte copyEscaped marks is one), or len(x): eight bytes
// at a time, where a byte at a time cost the insert-heavy apply a sixth of
// its CPU.
func plainRun[T string | []byte](x T, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(x); i += 8 {
		w := uint64(x[i]) | uint64(x[i+1])<<8 | uint64(x[i+2])<<16 | uint64(x[i+3])<<24 |
			uint64(x[i+4])<<32 | uint64(x[i+5])<<40 | uint64(x[i+6])<<48 | uint64(x[i+7])<<56
		bs := w ^ ones*'\\'
		// A byte below n sets its high bit in (w - ones*n) &^ w (n ≤ 0x80).
		if (w-ones*0x20)&^w&highs != 0 || (bs-ones)&^bs&highs != 0 {
			break
		}
	}
	for ; i < len(x); i++ {
		if x[i] < 0x20 || x[i] == '\\' {
			return i
		}
	}
	return i
}

func appendCopyBytes(b, x []byte, oid uint32) ([]byte, bool) {
	if oid != oidBytea {
		return b, false
	}
	b = append(b, `\\x`...)
	const hexDigits = "0123456789abcdef"
	for _, c := range x {
		b = append(b, hexDigits[c>>4], hexDigits[c&15])
	}
	return b, true
}

// appendCopyField appends a, an argument as Dialect.arg makes it for
// PostgreSQL, as a field of COPY's text format for a column of type oid, or
// reports false when COPY would not read it as the upsert's parameter is
// read (see above).
func appendCopyField(b []byte, a any, oid uint32) ([]byte, bool) {
	switch x := a.(type) {
	case nil:
		return append(b, `\N`...), true
	case string:
		return appendCopyText(b, x)
	case int64:
		return appendCopyInt(b, x, oid)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return b, false
		}
		switch oid {
		case oidFloat8:
			return strconv.AppendFloat(b, x, 'g', -1, 64), true
		case oidFloat4:
			// pgx binds a float64 into real as float32(x); the shortest
			// text of that float32 reads back as it.
			f := float32(x)
			if math.IsInf(float64(f), 0) {
				return b, false
			}
			return strconv.AppendFloat(b, float64(f), 'g', -1, 32), true
		}
	case []byte:
		return appendCopyBytes(b, x, oid)
	}
	return b, false
}

// CopyStats returns how many COPYs the PostgreSQL sinks of this process
// ran, and how many of them failed and left their rows to the upserts (for
// tests).
func CopyStats() (copied, fellBack uint64) { return copies.Load(), copyFallbacks.Load() }

// copies and copyFallbacks count the COPYs the PostgreSQL sinks of this
// process ran, and those of them that failed and left their rows to the
// upserts (for tests).
var copies, copyFallbacks atomic.Uint64
