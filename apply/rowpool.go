package apply

import (
	"sync"
	"unsafe"

	"github.com/redokit/redokit/codec"
)

// Run keeps every row change it holds as a copy of its own: the source may
// reuse an event's memory for the next one. The copies are recycled. A
// worker hands its transaction's copies back when the transaction commits
// (a Tx keeps no row past its end, Tx.ApplyRows), and the loop refills
// them with the next rows, so a replay allocates copies for the rows in
// flight, not for every row of the log, and the garbage collector has
// next to nothing to trace: at 600,000 rows, collecting the per-row copies
// cost PostgreSQL's insert-heavy apply a third of its CPU.

// rowCopy is a row change Run holds, with the memory of its byte values.
type rowCopy struct {
	row   codec.RowChange
	arena []byte
}

// size is the memory a copy keeps for its next row.
func (c *rowCopy) size() int {
	return cap(c.arena) + (cap(c.row.Columns)+cap(c.row.PreColumns))*int(unsafe.Sizeof(codec.Column{}))
}

const (
	maxPooledBytes = 64 << 20 // what the free copies may keep in all
	maxPooledCopy  = 64 << 10 // a copy larger (a big BLOB's) is left to the collector
	poolRefill     = 256      // copies the loop takes from the pool at once
)

// rowPool holds the copies no one uses, up to maxPooledBytes.
type rowPool struct {
	mu    sync.Mutex
	free  []*rowCopy
	bytes int
}

// put gives copies back; their rows must be unreachable from any Tx.
func (p *rowPool) put(cs []*rowCopy) {
	if len(cs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		n := c.size()
		if n > maxPooledCopy || p.bytes+n > maxPooledBytes {
			continue
		}
		p.bytes += n
		p.free = append(p.free, c)
	}
}

// take moves up to poolRefill free copies onto dst.
func (p *rowPool) take(dst []*rowCopy) []*rowCopy {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := max(len(p.free)-poolRefill, 0)
	for _, c := range p.free[k:] {
		p.bytes -= c.size()
	}
	dst = append(dst, p.free[k:]...)
	clear(p.free[k:])
	p.free = p.free[:k]
	return dst
}

// copyRow returns a copy of row that Run owns, from the spare copies when
// there is one.
func (r *runner) copyRow(row *codec.RowChange) *rowCopy {
	if len(r.spare) == 0 {
		r.spare = r.pool.take(r.spare)
	}
	var c *rowCopy
	if n := len(r.spare); n > 0 {
		c, r.spare[n-1] = r.spare[n-1], nil
		r.spare = r.spare[:n-1]
	} else {
		c = new(rowCopy)
	}
	c.arena = codec.CopyRow(&c.row, row, c.arena)
	if n := r.held.Add(1); n > r.peakHeld {
		r.peakHeld = n
	}
	return c
}

// release gives back the copies of rows no Tx holds any longer.
func (r *runner) release(cs []*rowCopy) {
	r.held.Add(-int64(len(cs)))
	r.pool.put(cs)
}
