package gocloud

import (
	"hash/maphash"
	"sync"

	gcblob "gocloud.dev/blob"
)

// casTable holds the key locks of Options.LocalCAS for one gocloud bucket.
// Keys hash onto a fixed set of mutexes: two keys may share one (so writes to
// them serialize), but no caller ever holds two, so there is no lock order to
// get wrong.
type casTable struct {
	refs  int // Drivers using the table; guarded by casTables.mu
	seed  maphash.Seed
	locks [256]sync.Mutex
}

func (t *casTable) lock(key string) (unlock func()) {
	m := &t.locks[maphash.String(t.seed, key)%uint64(len(t.locks))]
	m.Lock()
	return m.Unlock
}

// casTables maps each gocloud bucket to its table, so that two Drivers made
// over the same *gcblob.Bucket exclude each other, as LocalCAS requires.
var casTables = struct {
	mu sync.Mutex
	m  map[*gcblob.Bucket]*casTable
}{m: map[*gcblob.Bucket]*casTable{}}

func acquireCAS(b *gcblob.Bucket) *casTable {
	casTables.mu.Lock()
	defer casTables.mu.Unlock()
	t := casTables.m[b]
	if t == nil {
		t = &casTable{seed: maphash.MakeSeed()}
		casTables.m[b] = t
	}
	t.refs++
	return t
}

func releaseCAS(b *gcblob.Bucket) {
	casTables.mu.Lock()
	defer casTables.mu.Unlock()
	if t := casTables.m[b]; t != nil {
		if t.refs--; t.refs <= 0 {
			delete(casTables.m, b)
		}
	}
}
