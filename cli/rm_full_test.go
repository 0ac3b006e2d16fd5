package cli

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/testenv"
)

// fullStore is a store that a test can fill: while full, every put fails
// with ENOSPC, as on a full file system, until a deletion frees room for
// one object; failDeletes makes deletions fail.
type fullStore struct {
	*mem.Driver
	mu          sync.Mutex
	full        bool
	room        int
	failDeletes bool
}

func (d *fullStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	d.mu.Lock()
	if d.full {
		if d.room == 0 {
			d.mu.Unlock()
			return blob.Attrs{}, &os.PathError{Op: "write", Path: key, Err: syscall.ENOSPC}
		}
		d.room--
	}
	d.mu.Unlock()
	return d.Driver.Put(ctx, key, r, size, opts)
}

func (d *fullStore) Delete(ctx context.Context, keys []string) error {
	d.mu.Lock()
	if d.failDeletes {
		d.mu.Unlock()
		return errors.New("injected: delete refused")
	}
	d.room += len(keys)
	d.mu.Unlock()
	return d.Driver.Delete(ctx, keys)
}

func (d *fullStore) set(full, failDeletes bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.full, d.room, d.failDeletes = full, 0, failDeletes
}

// Close keeps the store for the next command of the test.
func (d *fullStore) Close() error { return nil }

var fullStores struct {
	sync.Mutex
	m map[string]*fullStore
}

func init() {
	blob.Register("fullmem", func(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
		fullStores.Lock()
		defer fullStores.Unlock()
		if fullStores.m == nil {
			fullStores.m = map[string]*fullStore{}
		}
		d := fullStores.m[u.Host]
		if d == nil {
			d = &fullStore{Driver: mem.NewDriver()}
			fullStores.m[u.Host] = d
		}
		return blob.NewBucket(d), nil
	})
}

// newFullStore returns a fresh fullmem:// store and its driver.
func newFullStore(t *testing.T) (string, *fullStore) {
	name := testenv.UniqueName("full")
	store := "fullmem://" + name
	b, err := blob.Open(context.Background(), store)
	flipMust(t, err)
	b.Close()
	fullStores.Lock()
	defer fullStores.Unlock()
	return store, fullStores.m[name]
}

// rm's messages say what is true on a full store (issue 29, finding 1: it
// said "run rm again to finish; until then writers and coordinators refuse
// the log" when it had written nothing): a log with segments is removed by
// deleting first; one with none cannot make room, deletes nothing and says
// that nothing refuses the log; a removal that fails after its marker says
// that the marker makes writers and coordinators refuse the log.
func TestRmOnAFullStore(t *testing.T) {
	store, d := newFullStore(t)
	genLog(t, store, "seg")
	d.set(true, false)
	r := cli(t, "rm", "--storage", store, "--log", "seg", "--yes")
	wantCode(t, r, 0)
	mustContain(t, "rm on a full store", r.stdout, "deleted log seg")
	d.set(false, false)
	wantCode(t, cli(t, "meta", "--storage", store, "--log", "seg"), 1)

	// Only a meta object: nothing to make room with.
	b, err := blob.Open(context.Background(), store)
	flipMust(t, err)
	defer b.Close()
	_, err = b.Put(context.Background(), "bare/meta", []byte("x"), nil) // any object: rm counts objects, not meaning
	flipMust(t, err)
	d.set(true, false)
	r = cli(t, "rm", "--storage", store, "--log", "bare", "--yes", "--force")
	wantCode(t, r, 1)
	mustContain(t, "rm with no room", r.stderr, "nothing deleted, the removal did not start", "do not refuse the log", "the store is full", "no space left on device")
	if ok, _ := b.Exists(context.Background(), "bare/meta"); !ok {
		t.Fatal("rm that did not start deleted the meta object")
	}

	// The marker written, then a deletion fails.
	d.set(false, true)
	r = cli(t, "rm", "--storage", store, "--log", "bare", "--yes", "--force")
	wantCode(t, r, 1)
	mustContain(t, "rm failing after its marker", r.stderr, "the delete marker is written", "refuse the log until rm is run again")
	d.set(false, false)
	wantCode(t, cli(t, "rm", "--storage", store, "--log", "bare", "--yes", "--force"), 0)
}
