package reader

import "hash/maphash"

// dedup drops exact duplicates among the events of one commit ts. It only
// runs for a commit ts that more than one unit (stream.unit: a segment, or
// the segments of a writer epoch that partition its events) holds events
// at: within one unit no copy is a duplicate (see the package doc), so a ts
// that one unit alone covers costs nothing.
//
// An event is identified by a 128-bit hash of its encoded bytes (two
// independently seeded 64-bit hashes): keeping the bytes themselves would hold
// a whole transaction in memory, and at 128 bits an accidental collision among
// the events of one transaction is not a practical concern.
type dedup struct {
	s1, s2 maphash.Seed
	m      map[[2]uint64]dupEntry
	more   map[dupKey]uint32 // counts of the second and later units
}

// dupEntry counts the copies of one encoding: how many were delivered, and
// how many the first unit that held it has shown so far.
type dupEntry struct {
	delivered uint32
	seg       int32 // the first unit seen with it
	n         uint32
}

type dupKey struct {
	h   [2]uint64
	seg int32
}

func newDedup() *dedup {
	return &dedup{s1: maphash.MakeSeed(), s2: maphash.MakeSeed(), m: map[[2]uint64]dupEntry{}}
}

// admit records one copy of payload from the given unit (a segment, or the
// segments of a writer epoch: see stream.unit) and reports whether to
// deliver it: it is delivered when its unit has now shown more copies of it
// than any unit before had.
func (d *dedup) admit(payload []byte, seg int32) bool {
	h := [2]uint64{maphash.Bytes(d.s1, payload), maphash.Bytes(d.s2, payload)}
	e, ok := d.m[h]
	var c uint32
	switch {
	case !ok:
		e = dupEntry{seg: seg, n: 1}
		c = 1
	case e.seg == seg:
		e.n++
		c = e.n
	default:
		if d.more == nil {
			d.more = map[dupKey]uint32{}
		}
		k := dupKey{h, seg}
		c = d.more[k] + 1
		d.more[k] = c
	}
	deliver := c > e.delivered
	if deliver {
		e.delivered = c
	}
	d.m[h] = e
	return deliver
}

// reset forgets everything, for the next commit ts.
func (d *dedup) reset() {
	if len(d.m) == 0 && len(d.more) == 0 {
		return
	}
	// clear keeps a map's buckets and costs time in proportion to them: after
	// one huge transaction, start small again rather than clearing a big map
	// at every commit ts that follows.
	if len(d.m) > 4096 {
		d.m = map[[2]uint64]dupEntry{}
	} else {
		clear(d.m)
	}
	d.more = nil
}
