package conformance

import (
	"fmt"
	"sync"

	"github.com/redokit/redokit/blob"
)

// delete: idempotent deletes, and reads after them.
func (s *suite) delete(t T) {
	t.Run("Missing", func(t T) {
		// GC may be re-run after a crash: deleting what is already gone
		// must succeed.
		e := s.bucket(t)
		if err := e.b.Delete(t.Context(), "delete/never-existed"); err != nil {
			t.Errorf("Delete of a key that never existed: %v", err)
		}
		put(t, e.b, "delete/dir/child", []byte("child"))
		if err := e.b.Delete(t.Context(), "delete/dir"); err != nil {
			t.Errorf("Delete of a key that is only a \"directory\" of another: %v", err)
		}
		wantContent(t, e.b, "delete/dir/child", []byte("child"), "after deleting its parent \"directory\"")
	})
	t.Run("Twice", func(t T) {
		e := s.bucket(t)
		const key = "delete/twice"
		put(t, e.b, key, []byte("x"))
		if err := e.b.Delete(t.Context(), key); err != nil {
			t.Fatalf("Delete(%q): %v", key, err)
		}
		if err := e.b.Delete(t.Context(), key); err != nil {
			t.Errorf("second Delete(%q): %v", key, err)
		}
	})
	t.Run("MixedBatch", func(t T) {
		e := s.bucket(t)
		put(t, e.b, "delete/a", []byte("a"))
		put(t, e.b, "delete/c", []byte("c"))
		put(t, e.b, "delete/keep", []byte("keep"))
		if err := e.b.Delete(t.Context(), "delete/a", "delete/b-missing", "delete/c", "delete/a"); err != nil {
			t.Errorf("Delete of existing, missing and repeated keys in one batch: %v", err)
		}
		s.settle(t, e.b, "", []string{"delete/keep"}, "after deleting a mixed batch")
	})
	t.Run("ReadAfterDelete", func(t T) {
		e := s.bucket(t)
		ctx := t.Context()
		const key = "delete/read-after"
		put(t, e.b, key, []byte("doomed"))
		if err := e.b.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q): %v", key, err)
		}
		_, err := e.b.Stat(ctx, key)
		wantNotExist(t, err, key, fmt.Sprintf("Stat(%q) after Delete", key))
		_, err = e.b.ReadAll(ctx, key)
		wantNotExist(t, err, key, fmt.Sprintf("ReadAll(%q) after Delete", key))
		_, err = e.b.ReadRange(ctx, key, 1, 2)
		wantNotExist(t, err, key, fmt.Sprintf("ReadRange(%q, 1, 2) after Delete", key))
		if ok, err := e.b.Exists(ctx, key); ok || err != nil {
			t.Errorf("Exists(%q) after Delete = %v, %v; want false, nil", key, ok, err)
		}
		s.settle(t, e.b, "", nil, "after Delete")
	})
	t.Run("Recreate", func(t T) {
		e := s.bucket(t)
		const key = "delete/recreate"
		put(t, e.b, key, []byte("first life"))
		if err := e.b.Delete(t.Context(), key); err != nil {
			t.Fatalf("Delete(%q): %v", key, err)
		}
		put(t, e.b, key, []byte("second life"))
		wantContent(t, e.b, key, []byte("second life"), "after delete and Put again")
		s.settle(t, e.b, "", []string{key}, "after delete and Put again")
	})
}

// batchDeleteKeys is more than two of S3's DeleteObjects batches.
const batchDeleteKeys = 2*blob.MaxDeleteBatch + blob.MaxDeleteBatch/2

// batchDelete: thousands of keys in batches of MaxDeleteBatch.
func (s *suite) batchDelete(t T) {
	e := s.bucket(t)
	ctx := t.Context()
	keys := make([]string, batchDeleteKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("batch/%05d", i)
	}
	// A few workers: the point is the delete, and a remote store takes a
	// while for 2,500 sequential Puts.
	putMany(t, e.b, keys)
	s.settle(t, e.b, "batch/", keys, fmt.Sprintf("after putting %d keys", len(keys)))

	before := e.b.Stats()
	if err := e.b.Delete(ctx, keys...); err != nil {
		t.Fatalf("Delete of %d keys: %v", len(keys), err)
	}
	d := e.b.Stats().Sub(before)
	wantCalls := int64((len(keys) + blob.MaxDeleteBatch - 1) / blob.MaxDeleteBatch)
	if d.Deletes != wantCalls || d.DeletedKeys != int64(len(keys)) {
		t.Errorf("Delete of %d keys made %d driver calls for %d keys, want %d calls (Bucket.Stats)", len(keys), d.Deletes, d.DeletedKeys, wantCalls)
	}
	s.settle(t, e.b, "", nil, fmt.Sprintf("after deleting %d keys in one call", len(keys)))
	for _, k := range []string{keys[0], keys[blob.MaxDeleteBatch-1], keys[blob.MaxDeleteBatch], keys[len(keys)-1]} {
		_, err := e.b.Stat(ctx, k)
		wantNotExist(t, err, k, fmt.Sprintf("Stat(%q) after the batch delete", k))
	}
}

// putMany puts each key with its own name as content, on 16 goroutines.
func putMany(t T, b *blob.Bucket, keys []string) {
	t.Helper()
	ctx := t.Context()
	var (
		mu    sync.Mutex
		first error
		next  = make(chan string)
		wg    sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for k := range next {
				if _, err := b.Put(ctx, k, []byte(k), nil); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("Put(%q): %w", k, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, k := range keys {
		next <- k
	}
	close(next)
	wg.Wait()
	if first != nil {
		t.Fatalf("putting %d keys: %v", len(keys), first)
	}
}
