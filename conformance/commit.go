package conformance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redokit/redokit/blob"
)

// hookReadTimeout bounds a read made from inside BeforeCommit: a driver
// that holds a lock readers need while it calls the hook would hang there.
const hookReadTimeout = 10 * time.Second

// beforeCommit checks blob.PutOptions.BeforeCommit: it runs once, before
// the put is visible, and its error abandons the put. Bucket calls it for
// drivers that are not blob.Stagers; a Stager calls it itself, after its
// staging, and must keep the object hidden until it returns.
func (s *suite) beforeCommit(t T) {
	const key = "commit/object"
	old := payload(333, 41)
	data := payload(4096, 42)
	cases := []struct {
		name           string
		overwrite, cas bool
	}{{"New", false, false}, {"Overwrite", true, false}, {"CompareAndSwap", true, true}}
	for _, c := range cases {
		// setup makes the subtest's bucket and the options of the put under
		// test: of a new key, over an old object, or by compare-and-swap.
		setup := func(t T) (env, blob.PutOptions) {
			e := s.bucket(t)
			var opts blob.PutOptions
			if c.overwrite {
				a := put(t, e.b, key, old)
				if c.cas {
					opts.IfMatch = a.ETag
				}
			}
			return e, opts
		}
		run := t.Run
		if c.cas {
			run = func(name string, f func(T)) bool { s.conditional(t, name, f); return true }
		}
		run("Invisible"+c.name, func(t T) {
			e, opts := setup(t)
			calls := 0
			opts.BeforeCommit = func(context.Context) error {
				calls++
				if err := readFromHook(e.b, key, c.overwrite, old); err != nil {
					t.Errorf("from BeforeCommit: %v", err)
				}
				return nil
			}
			if _, err := e.b.Put(t.Context(), key, data, &opts); err != nil {
				t.Fatalf("Put with BeforeCommit: %v", err)
			}
			if calls != 1 {
				t.Errorf("BeforeCommit ran %d times during a Put that succeeded, want once", calls)
			}
			wantContent(t, e.b, key, data, "after a Put whose BeforeCommit returned nil")
		})
		run("Abandon"+c.name, func(t T) {
			e, opts := setup(t)
			refuse := errors.New("conformance: BeforeCommit refuses")
			opts.BeforeCommit = func(context.Context) error { return refuse }
			_, err := e.b.Put(t.Context(), key, data, &opts)
			if !errors.Is(err, refuse) {
				t.Errorf("Put whose BeforeCommit failed returned %v, want an error wrapping BeforeCommit's", err)
			}
			if !c.overwrite {
				_, err := e.b.Stat(t.Context(), key)
				wantNotExist(t, err, key, fmt.Sprintf("Stat(%q) after a Put abandoned by BeforeCommit", key))
				if got := listKeysNow(t, e.b, ""); len(got) != 0 {
					t.Errorf("List after a Put abandoned by BeforeCommit: %s, want nothing", quoteKeys(got, 5))
				}
				return
			}
			wantContent(t, e.b, key, old, "after a Put abandoned by BeforeCommit (the old object must be intact)")
			s.settle(t, e.b, "", []string{key}, "after a Put abandoned by BeforeCommit (no temporary object may be left)")
		})
	}
}

// readFromHook reads key from inside BeforeCommit: it must show the old
// object (or nothing), never the one being put.
func readFromHook(b *blob.Bucket, key string, exists bool, old []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), hookReadTimeout)
	defer cancel()
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		d, err := b.ReadAll(ctx, key)
		ch <- result{d, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		return fmt.Errorf("ReadAll(%q) did not return within %v: a driver must not hold what readers need while it calls BeforeCommit", key, hookReadTimeout)
	}
	switch {
	case !exists && r.err == nil:
		return fmt.Errorf("ReadAll(%q) found %d bytes before the put's commit point, want not-exist (the object became visible before BeforeCommit returned)", key, len(r.data))
	case !exists && !blob.IsNotExist(r.err):
		return fmt.Errorf("ReadAll(%q) = %v, want not-exist", key, r.err)
	case exists && r.err != nil:
		return fmt.Errorf("ReadAll(%q) of the old object: %v", key, r.err)
	case exists && string(r.data) != string(old):
		return fmt.Errorf("ReadAll(%q) returned %d bytes that are not the old object's %d: the new object became visible before BeforeCommit returned", key, len(r.data), len(old))
	}
	return nil
}
