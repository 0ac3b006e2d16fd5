package difffuzz

import (
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/codec/codectest"
)

// wrow is a row in a transaction under way: what it was before the
// transaction (nil if the transaction inserted it) and what it is now (nil
// once deleted).
type wrow struct {
	pre, cur []codec.Value
	touched  bool
}

// work is one table in a transaction under way. In statement order (stmt)
// each change is an event in the order it ran, and a row may change several
// times; in the final-state shape each row changes at most once and the
// events are its image before and after the transaction.
type work struct {
	b    *builder
	r    *rand.Rand
	t    *Table
	stmt bool
	rows []*wrow
	occ  []map[string]int // per unique index of t: tuple → live rows holding it
	evs  []codec.Event
}

func (w *work) uniq() []*Index {
	var out []*Index
	for _, x := range w.t.Idx {
		if x.Unique {
			out = append(out, x)
		}
	}
	return out
}

func (w *work) add(row []codec.Value, d int) {
	for i, x := range w.uniq() {
		if k, ok := w.t.tuple(x, row); ok {
			w.occ[i][k] += d
		}
	}
}

func (w *work) ok() bool {
	for _, m := range w.occ {
		for _, n := range m {
			if n > 1 {
				return false
			}
		}
	}
	if w.b.h.FK && w.t.Tree {
		// Every parent there: the upstream checks its foreign key.
		idc, pc := w.t.col("id"), w.t.col("parent")
		ids := map[int64]bool{}
		for _, row := range w.rows {
			if row.cur != nil {
				ids[row.cur[idc].Int()] = true
			}
		}
		for _, row := range w.rows {
			if row.cur != nil && !row.cur[pc].IsNull() && !ids[row.cur[pc].Int()] {
				return false
			}
		}
	}
	return true
}

// change sets the rows at idx to imgs (nil deletes) together, if every
// unique index allows the result; in statement order each is an event.
func (w *work) change(idx []int, imgs [][]codec.Value) bool {
	olds := make([][]codec.Value, len(idx))
	for k, i := range idx {
		olds[k] = w.rows[i].cur
		if olds[k] != nil {
			w.add(olds[k], -1)
		}
		if imgs[k] != nil {
			w.add(imgs[k], 1)
		}
		w.rows[i].cur = imgs[k]
	}
	if !w.ok() {
		for k, i := range idx {
			if imgs[k] != nil {
				w.add(imgs[k], -1)
			}
			if olds[k] != nil {
				w.add(olds[k], 1)
			}
			w.rows[i].cur = olds[k]
		}
		return false
	}
	for k, i := range idx {
		if w.stmt {
			w.emit(olds[k], imgs[k])
		}
		w.rows[i].touched = true
	}
	return true
}

func (w *work) emit(pre, post []codec.Value) {
	var p, q []codec.Column
	if pre != nil {
		p = w.t.image(pre)
	}
	if post != nil {
		q = w.t.image(post)
		for i, c := range w.t.Cols {
			if c.T.fam == fStr && strings.IndexByte(post[i].Text(), 0) >= 0 {
				w.b.out.NUL[w.t.Name] = true
			}
		}
	}
	w.evs = append(w.evs, codectest.Update(w.b.ts, w.b.tn(w.t), p, q))
}

func (w *work) insert(img []codec.Value) bool {
	w.rows = append(w.rows, &wrow{})
	if !w.change([]int{len(w.rows) - 1}, [][]codec.Value{img}) {
		w.rows = w.rows[:len(w.rows)-1]
		return false
	}
	return true
}

// live returns the rows an op may change: those still there, and in the
// final-state shape only those the transaction did not change yet.
func (w *work) live() []int {
	var out []int
	for i, row := range w.rows {
		if row.cur != nil && (w.stmt || !row.touched) {
			out = append(out, i)
		}
	}
	return out
}

// value makes a value for column c of t.
func (w *work) value(c *Column) codec.Value {
	if c.Nullable && w.r.IntN(7) == 0 {
		return codec.Null()
	}
	in, _ := w.t.inIndex(c.Name)
	v := c.T.gen(w.r, in, w.b.h.NUL && c.T.fam == fStr)
	if in && c.T.text && !c.Bin && w.r.IntN(3) == 0 {
		// A case-insensitive key: 'a' and 'A' are one value upstream.
		v = codec.StringValue(strings.ToUpper(v.Text()))
	}
	if in && c.T.text && c.T != tChar && v.Kind() == codec.KindString && w.r.IntN(6) == 0 {
		// PAD SPACE: 'a' and 'a ' are one value upstream (a CHAR
		// column drops trailing spaces).
		v = codec.StringValue(v.Text() + " ")
	}
	return v
}

// newRow makes a row of t.
func (w *work) newRow() []codec.Value {
	row := make([]codec.Value, len(w.t.Cols))
	for i, c := range w.t.Cols {
		row[i] = w.value(c)
	}
	if w.t.Tree {
		row[w.t.col("id")] = codec.IntValue(w.r.Int64N(40))
		row[w.t.col("parent")] = w.parent()
	}
	if w.t.Ref != "" {
		row[w.t.col("pid")] = w.pid()
	}
	return row
}

// pid is a child's reference: NULL or the id of a row of its tree (as the
// tree stands, with what this transaction wrote to it so far).
func (w *work) pid() codec.Value {
	p := w.b.tables[w.t.Ref]
	if p == nil || len(p.Rows) == 0 || w.r.IntN(5) == 0 {
		return codec.Null()
	}
	return p.Rows[w.r.IntN(len(p.Rows))][p.col("id")]
}

// parent is a parent id for a tree row: NULL or the id of a row.
func (w *work) parent() codec.Value {
	l := w.live()
	if len(l) == 0 || w.r.IntN(4) == 0 {
		return codec.Null()
	}
	return w.rows[l[w.r.IntN(len(l))]].cur[w.t.col("id")]
}

// distinctOK reports whether a keyless row is new to a ran-ahead history,
// and records it.
func (w *work) distinctOK(row []codec.Value) bool {
	if w.b.distinct == nil || w.t.key() != nil {
		return true
	}
	m := w.b.distinct[w.t.Name]
	if m == nil {
		m = map[string]bool{}
		w.b.distinct[w.t.Name] = m
	}
	k := rowKey(row)
	if m[k] {
		return false
	}
	m[k] = true
	return true
}

func rowKey(row []codec.Value) string {
	var s strings.Builder
	for _, v := range row {
		s.WriteString(v.String())
		s.WriteByte(0)
	}
	return s.String()
}

func (b *builder) txn(r *rand.Rand, big bool) {
	b.ts++
	ns := b.names_()
	if len(ns) == 0 {
		return
	}
	stmt := !big && r.IntN(2) == 0
	var evs []codec.Event
	picked := map[string]bool{}
	var order []*Table
	for range 1 + r.IntN(2) {
		t := b.tables[ns[r.IntN(len(ns))]]
		if p := b.tables[t.Ref]; p != nil && r.IntN(2) == 0 {
			// A child with its tree in one transaction: new parents
			// and their children, children moving to a new parent.
			if r.IntN(2) == 0 {
				order = append(order, p, t)
			} else {
				order = append(order, t, p)
			}
			continue
		}
		order = append(order, t)
	}
	saved := map[*Table][][]codec.Value{}
	for _, t := range order {
		if picked[t.Name] || b.frozen[t.Name] {
			continue
		}
		picked[t.Name] = true
		saved[t] = t.Rows
		if b.ckpt && t.key() == nil {
			b.out.Keyless[t.Name] = true
		}
		w := &work{b: b, r: r, t: t, stmt: stmt}
		for range w.uniq() {
			w.occ = append(w.occ, map[string]int{})
		}
		for _, row := range t.Rows {
			w.rows = append(w.rows, &wrow{pre: row, cur: row})
			w.add(row, 1)
		}
		n := 1 + r.IntN(6)
		if big {
			n = 200 + r.IntN(800)
		}
		for range n {
			w.op(big)
		}
		if !stmt {
			for _, row := range w.rows {
				if row.touched && !(row.pre == nil && row.cur == nil) {
					w.emit(row.pre, row.cur)
				}
			}
		}
		t.Rows = nil
		for _, row := range w.rows {
			if row.cur != nil {
				t.Rows = append(t.Rows, row.cur)
			}
		}
		evs = append(evs, w.evs...)
	}
	if b.h.FK && !b.childrenOK() {
		// A child left without its parent: the upstream, checking its
		// foreign keys, refuses the transaction.
		for t, rows := range saved {
			t.Rows = rows
		}
		return
	}
	if !stmt {
		// Each row's final state, in no meaningful order.
		r.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	}
	b.evs = append(b.evs, evs...)
}

// childrenOK reports whether every child row's pid is an id of its tree.
func (b *builder) childrenOK() bool {
	for _, c := range b.tables {
		p := b.tables[c.Ref]
		if p == nil {
			continue
		}
		ids := map[int64]bool{}
		for _, row := range p.Rows {
			ids[row[p.col("id")].Int()] = true
		}
		pc := c.col("pid")
		for _, row := range c.Rows {
			if !row[pc].IsNull() && !ids[row[pc].Int()] {
				return false
			}
		}
	}
	return true
}

// op makes one change of the transaction, or none when its try fails.
func (w *work) op(big bool) {
	t, r := w.t, w.r
	l := w.live()
	key := t.key()
	p := r.IntN(100)
	if big {
		p = r.IntN(45) // mostly inserts
	}
	switch {
	case p < 35 || len(l) == 0:
		for range 4 {
			row := w.newRow()
			if !w.distinctOK(row) {
				continue
			}
			if w.insert(row) {
				return
			}
		}
	case key == nil && p < 50:
		if w.b.distinct == nil {
			// an identical row again
			w.insert(slices.Clone(w.rows[l[r.IntN(len(l))]].cur))
		}
	case p < 60 || (key == nil && p < 70):
		// change some columns (the key's too, sometimes)
		i := l[r.IntN(len(l))]
		img := slices.Clone(w.rows[i].cur)
		for range 1 + r.IntN(2) {
			ci := r.IntN(len(t.Cols))
			c := t.Cols[ci]
			if t.Tree && c.Name == "parent" {
				img[ci] = w.parent()
				continue
			}
			if t.Ref != "" && c.Name == "pid" {
				img[ci] = w.pid()
				continue
			}
			if t.Tree && c.Name == "id" {
				continue
			}
			img[ci] = w.value(c)
		}
		if w.distinctOK(img) {
			w.change([]int{i}, [][]codec.Value{img})
		}
	case p < 75:
		i := l[r.IntN(len(l))]
		w.change([]int{i}, [][]codec.Value{nil})
	case p < 83 && key != nil && len(l) >= 2:
		w.swap(key, l)
	case p < 91 && len(l) >= 2:
		w.moveUnique(l)
	case t.Tree:
		w.rekeyParent(l)
	}
}

// swap exchanges the keys of two rows: in the final-state shape as two
// updates, in statement order through a spare key, as a binlog has it.
func (w *work) swap(key *Index, l []int) {
	r, t := w.r, w.t
	i := l[r.IntN(len(l))]
	j := l[r.IntN(len(l))]
	if i == j {
		return
	}
	a, b := slices.Clone(w.rows[i].cur), slices.Clone(w.rows[j].cur)
	for _, n := range key.Cols {
		c := t.col(n)
		a[c], b[c] = b[c], a[c]
	}
	if !w.stmt {
		w.change([]int{i, j}, [][]codec.Value{a, b})
		return
	}
	spare := slices.Clone(w.rows[i].cur)
	for range 4 {
		for _, n := range key.Cols {
			c := t.col(n)
			spare[c] = w.value(t.Cols[c])
		}
		if w.change([]int{i}, [][]codec.Value{spare}) {
			if !w.change([]int{j}, [][]codec.Value{b}) {
				return
			}
			w.change([]int{i}, [][]codec.Value{a})
			return
		}
	}
}

// moveUnique moves the value of a unique index from one row to another: the
// row holding it takes a new value (or NULL), the other takes it.
func (w *work) moveUnique(l []int) {
	r, t := w.r, w.t
	var xs []*Index
	for _, x := range w.uniq() {
		if x != t.key() {
			xs = append(xs, x)
		}
	}
	if len(xs) == 0 {
		return
	}
	x := xs[r.IntN(len(xs))]
	i, j := l[r.IntN(len(l))], l[r.IntN(len(l))]
	if i == j {
		return
	}
	holder, taker := slices.Clone(w.rows[i].cur), slices.Clone(w.rows[j].cur)
	for _, n := range x.Cols {
		c := t.col(n)
		taker[c] = holder[c]
		holder[c] = w.value(t.Cols[c])
	}
	if !w.stmt {
		w.change([]int{i, j}, [][]codec.Value{holder, taker})
		return
	}
	if w.change([]int{i}, [][]codec.Value{holder}) {
		w.change([]int{j}, [][]codec.Value{taker})
	}
}

// rekeyParent changes the id of a tree row and repoints its children, as a
// cascade of ON UPDATE would.
func (w *work) rekeyParent(l []int) {
	r, t := w.r, w.t
	idc, pc := t.col("id"), t.col("parent")
	i := l[r.IntN(len(l))]
	old := w.rows[i].cur[idc]
	neu := codec.IntValue(40 + r.Int64N(60))
	idx := []int{}
	var imgs [][]codec.Value
	for k, row := range w.rows {
		if row.cur == nil {
			continue
		}
		img := slices.Clone(row.cur)
		changed := false
		if k == i {
			img[idc] = neu
			changed = true
		}
		if row.cur[pc].Equal(old) {
			img[pc] = neu
			changed = true
		}
		if changed {
			if !w.stmt && row.touched {
				return
			}
			idx = append(idx, k)
			imgs = append(imgs, img)
		}
	}
	// The parent first, then each child, as the cascade runs: one
	// statement, checked as one.
	if p := slices.Index(idx, i); p > 0 {
		idx[0], idx[p] = idx[p], idx[0]
		imgs[0], imgs[p] = imgs[p], imgs[0]
	}
	w.change(idx, imgs)
}
