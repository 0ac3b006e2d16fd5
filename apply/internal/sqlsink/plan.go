package sqlsink

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/redokit/redokit/codec"
)

// plan turns rows into ops, commit ts by commit ts: for each, the net effect
// of its row changes on each row, every delete before every upsert.
//
// The row changes of one commit ts are one upstream transaction, and they
// come in one of two shapes, which the log does not label:
//
//   - Each row's final state, at most one change per row (TiDB and TiCDC):
//     a pre image is the row before the transaction, a post image the row
//     after it, and their order means nothing. A swap of two keys is then
//     update (k=1→2) and update (k=2→1), each pre image the row the key
//     held before.
//   - Every statement's change in the order it ran (a binlog, PostgreSQL's
//     logical decoding): one row may change several times, and a pre image
//     is the row as the changes before it in the transaction left it. A swap
//     through a spare key is update (1→3), update (2→1), update (3→2); a row
//     inserted and deleted again is an insert and a delete.
//
// Deleting every pre image's key and then upserting every post image is
// right for the first shape and leaves a ghost row in the second (the row
// at the spare key 3, the inserted row). Applying the changes in their
// order is right for the second and loses a row in the first (the upsert of
// k=2 is deleted by the second update's pre image). plan tells them apart
// change by change: a pre image that is exactly the image an earlier change
// of the same commit ts wrote at its key is that row, written and now
// changed again inside the transaction (the second shape), and the two
// cancel; any other pre image is a row the key held before the commit ts
// (the first shape, or the first change of a row in the second), which is
// deleted unless a later or earlier change writes the key. Where the two
// readings could disagree — a pre image equal to the image another row
// moved onto the key — both leave the key as it was: the row there before
// (the first reading) or no row, as before (the second). So each key ends
// with its last image written, or deleted, or untouched, in both shapes.
//
// A table without a key: identical rows cannot be told apart, so a pre image
// cancels a post image exactly equal to it, in either order (the row
// inserted and deleted again, or deleted and inserted again, is no change),
// and the rest are deletes of one row each, then inserts.
func plan(ops []rowOp, rows []*codec.RowChange) []rowOp {
	var p planner
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].CommitTs == rows[i].CommitTs {
			j++
		}
		ops = p.commitTs(ops, rows[i:j])
		i = j
	}
	return ops
}

// planner holds what plan reuses from one commit ts to the next.
type planner struct {
	keys  map[string]int // key → index in states
	state []keyState
	order []int
	kb    []byte
}

// keyState is what the changes of one commit ts did to one key.
type keyState struct {
	img     []codec.Column // the image the key holds at the end, nil if none was written (or it was changed again)
	delImg  []codec.Column // a pre image of the row the key held before the commit ts
	initDel bool           // that row is changed or deleted
	touched bool           // a change before the current one had this key
	fresh   bool           // img is an insert of a key no change before it had
	last    int            // the position of the change that wrote img
}

// commitTs appends the ops of the row changes of one commit ts.
func (p *planner) commitTs(ops []rowOp, rows []*codec.RowChange) []rowOp {
	if len(rows) == 1 {
		return singleOps(ops, rows[0])
	}
	keyed, keyless := true, true
	for _, r := range rows {
		for _, img := range [2][]codec.Column{r.PreColumns, r.Columns} {
			if len(img) == 0 {
				continue
			}
			if codec.KeyColumns(img) == nil {
				keyed = false
			} else {
				keyless = false
			}
		}
	}
	switch {
	case keyed:
		return p.keyedOps(ops, rows)
	case keyless:
		return p.keylessOps(ops, rows)
	}
	// Images with a key and without one at one commit ts: no DDL runs
	// inside a commit ts, so this log is not one of a table. Every delete,
	// then every upsert.
	for _, r := range rows {
		if op := r.Op(); op == codec.OpDelete || op == codec.OpUpdate && codec.KeyChanged(r.PreColumns, r.Columns) {
			ops = append(ops, rowOp{del: true, ts: r.CommitTs, img: r.PreColumns})
		}
	}
	for _, r := range rows {
		if op := r.Op(); op == codec.OpInsert || op == codec.OpUpdate {
			ops = append(ops, rowOp{ts: r.CommitTs, img: r.Columns, fresh: op == codec.OpInsert})
		}
	}
	return ops
}

// singleOps appends the ops of a commit ts with one row change: a delete, an
// upsert, or for an update that moves the row to another key (or of a table
// without a key) both — a REPLACE of the post image alone would not undo a
// key change: the old row would stay.
func singleOps(ops []rowOp, r *codec.RowChange) []rowOp {
	switch r.Op() {
	case codec.OpDelete:
		ops = append(ops, rowOp{del: true, ts: r.CommitTs, img: r.PreColumns})
	case codec.OpUpdate:
		if codec.KeyChanged(r.PreColumns, r.Columns) {
			ops = append(ops, rowOp{del: true, ts: r.CommitTs, img: r.PreColumns})
		}
		ops = append(ops, rowOp{ts: r.CommitTs, img: r.Columns})
	case codec.OpInsert:
		ops = append(ops, rowOp{ts: r.CommitTs, img: r.Columns, fresh: true})
	}
	return ops
}

// keyedOps is commitTs for a table with a key (see plan).
func (p *planner) keyedOps(ops []rowOp, rows []*codec.RowChange) []rowOp {
	if p.keys == nil {
		p.keys = map[string]int{}
	}
	clear(p.keys)
	clear(p.state)
	p.state = p.state[:0]
	at := func(img []codec.Column) *keyState {
		p.kb = p.kb[:0]
		for _, i := range codec.KeyColumns(img) {
			p.kb = appendExact(p.kb, img[i].Value)
		}
		i, ok := p.keys[string(p.kb)]
		if !ok {
			i = len(p.state)
			p.keys[string(p.kb)] = i
			p.state = append(p.state, keyState{})
		}
		return &p.state[i]
	}
	for n, r := range rows {
		if pre := r.PreColumns; len(pre) > 0 {
			st := at(pre)
			if st.img != nil && sameImage(st.img, pre) {
				// The row an earlier change of this commit ts wrote,
				// changed again: what it was before is what the key
				// holds before the commit ts.
				st.img = nil
			} else if !st.initDel {
				st.initDel, st.delImg = true, pre
			}
			st.touched = true
			st.fresh = false
		}
		if post := r.Columns; len(post) > 0 {
			st := at(post)
			st.fresh = len(r.PreColumns) == 0 && !st.touched
			st.img, st.last, st.touched = post, n, true
		}
	}
	ts := rows[0].CommitTs
	for i := range p.state {
		if st := &p.state[i]; st.img == nil && st.initDel {
			ops = append(ops, rowOp{del: true, ts: ts, img: st.delImg})
		}
	}
	// The upserts in the order of the changes that wrote them.
	p.order = p.order[:0]
	for i := range p.state {
		if p.state[i].img != nil {
			p.order = append(p.order, i)
		}
	}
	slices.SortFunc(p.order, func(a, b int) int { return p.state[a].last - p.state[b].last })
	for _, i := range p.order {
		st := &p.state[i]
		ops = append(ops, rowOp{ts: ts, img: st.img, fresh: st.fresh})
	}
	return ops
}

// keylessOps is commitTs for a table without a key (see plan).
func (p *planner) keylessOps(ops []rowOp, rows []*codec.RowChange) []rowOp {
	// The unmatched post images of each content, by position.
	posts := map[string][]int{}
	cancelled := make([]bool, 2*len(rows)) // 2n: pre image of row n; 2n+1: its post image
	for n, r := range rows {
		if len(r.Columns) > 0 {
			p.kb = appendImage(p.kb[:0], r.Columns)
			posts[string(p.kb)] = append(posts[string(p.kb)], n)
		}
	}
	for n, r := range rows {
		if len(r.PreColumns) == 0 {
			continue
		}
		p.kb = appendImage(p.kb[:0], r.PreColumns)
		if m := posts[string(p.kb)]; len(m) > 0 {
			cancelled[2*n], cancelled[2*m[0]+1] = true, true
			posts[string(p.kb)] = m[1:]
		}
	}
	for n, r := range rows {
		if len(r.PreColumns) > 0 && !cancelled[2*n] {
			ops = append(ops, rowOp{del: true, ts: r.CommitTs, img: r.PreColumns})
		}
	}
	for n, r := range rows {
		if len(r.Columns) > 0 && !cancelled[2*n+1] {
			ops = append(ops, rowOp{ts: r.CommitTs, img: r.Columns, fresh: len(r.PreColumns) == 0})
		}
	}
	return ops
}

// sameImage reports whether two images hold the same columns with exactly
// the same values.
func sameImage(a, b []codec.Column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || !a[i].Value.Equal(b[i].Value) {
			return false
		}
	}
	return true
}

// appendImage appends an exact encoding of an image's column names and
// values.
func appendImage(b []byte, img []codec.Column) []byte {
	for i := range img {
		b = binary.AppendUvarint(b, uint64(len(img[i].Name)))
		b = append(b, img[i].Name...)
		b = appendExact(b, img[i].Value)
	}
	return b
}

// appendExact appends an encoding of v that two values share only when
// they are Equal.
func appendExact(b []byte, v codec.Value) []byte {
	b = append(b, byte(v.Kind()))
	switch v.Kind() {
	case codec.KindNull:
	case codec.KindInt:
		b = binary.AppendVarint(b, v.Int())
	case codec.KindUint, codec.KindBit, codec.KindEnum, codec.KindSet:
		b = binary.AppendUvarint(b, v.Uint())
	case codec.KindFloat32:
		b = binary.AppendUvarint(b, uint64(math.Float32bits(v.Float32())))
	case codec.KindFloat64:
		b = binary.AppendUvarint(b, math.Float64bits(v.Float64()))
	case codec.KindDecimal, codec.KindString, codec.KindBytes, codec.KindJSON:
		b = binary.AppendUvarint(b, uint64(len(v.Bytes())))
		b = append(b, v.Bytes()...)
	default: // dates, times, durations, years: their text keeps every field
		s := v.String()
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}
