//go:build unix

package local

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/backendtest"
)

// recorder traces the driver's durability steps through its hook, and can
// fail chosen steps.
type recorder struct {
	mu     sync.Mutex
	events []string
	fail   func(op, path string) error
}

func (r *recorder) hook(op, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, op+" "+path)
	if r.fail != nil {
		return r.fail(op, path)
	}
	return nil
}

// take returns the events so far and forgets them.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

func traced(t *testing.T, root string) (*blob.Bucket, *recorder) {
	t.Helper()
	d, err := NewDriver(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	d.hook = rec.hook
	return backendtest.Bucket(t, d), rec
}

func parentDir(p string) string {
	if dir := path.Dir(p); dir != "." {
		return dir
	}
	return ""
}

// index returns the first index at or after from of an event matching
// pred, or -1.
func index(ev []string, from int, pred func(string) bool) int {
	for i := from; i < len(ev); i++ {
		if pred(ev[i]) {
			return i
		}
	}
	return -1
}

func is(s string) func(string) bool { return func(e string) bool { return e == s } }

// checkCommitted checks the durability rules for one write that put a file
// under key with a rename: the file was synced before the rename, the key's
// directory after it, and every directory created was synced into its
// parent before the write returned.
func checkCommitted(t *testing.T, ev []string, key string, fileSync func(string) bool) {
	t.Helper()
	r := index(ev, 0, is("rename "+key))
	if r < 0 {
		t.Fatalf("no rename of %s in %q", key, ev)
	}
	if s := index(ev, 0, fileSync); s < 0 || s > r {
		t.Fatalf("the file of %s was not synced before its rename: %q", key, ev)
	}
	if index(ev, r, is("sync-dir "+parentDir(key))) < 0 {
		t.Fatalf("the directory of %s was not synced after the rename: %q", key, ev)
	}
	checkMkdirs(t, ev)
}

func checkMkdirs(t *testing.T, ev []string) {
	t.Helper()
	for i, e := range ev {
		if dir, ok := strings.CutPrefix(e, "mkdir "); ok {
			if index(ev, i, is("sync-dir "+parentDir(dir))) < 0 {
				t.Fatalf("directory %s was created but its parent not synced: %q", dir, ev)
			}
		}
	}
}

func isTempSync(e string) bool {
	return strings.HasPrefix(e, "sync-file "+internalName+"/tmp/") && strings.HasSuffix(e, tempSuffix)
}

func TestPutSyncs(t *testing.T) {
	root := t.TempDir()
	b, rec := traced(t, root)
	mustPut(t, b, "a/b/c", []byte("x"))
	ev := rec.take()
	checkCommitted(t, ev, "a/b/c", isTempSync)
	if !slices.Contains(ev, "mkdir a") || !slices.Contains(ev, "mkdir a/b") {
		t.Fatalf("no mkdirs traced: %q", ev)
	}
	// Known directories are not synced again by the same driver.
	mustPut(t, b, "a/b/d", []byte("x"))
	ev = rec.take()
	checkCommitted(t, ev, "a/b/d", isTempSync)
	if slices.Contains(ev, "sync-dir ") || slices.Contains(ev, "sync-dir a") {
		t.Fatalf("known directories synced again: %q", ev)
	}
	// A driver that did not create a directory syncs it into its parent
	// once: its creator may not have done so yet.
	b2, rec2 := traced(t, root)
	mustPut(t, b2, "a/b/e", []byte("x"))
	ev = rec2.take()
	checkCommitted(t, ev, "a/b/e", isTempSync)
	for _, want := range []string{"sync-dir ", "sync-dir a"} {
		if !slices.Contains(ev, want) {
			t.Fatalf("%q missing from %q", want, ev)
		}
	}
	// Deletes are synced too.
	if err := b.Delete(context.Background(), "a/b/c", "a/b/d"); err != nil {
		t.Fatal(err)
	}
	ev = rec.take()
	u := index(ev, 0, is("unlink a/b/d"))
	if u < 0 || index(ev, u, is("sync-dir a/b")) < 0 {
		t.Fatalf("delete not synced: %q", ev)
	}
}

func TestAppendSyncs(t *testing.T) {
	ctx := context.Background()
	b, rec := traced(t, t.TempDir())
	af, err := b.OpenAppend(ctx, "s/active")
	if err != nil {
		t.Fatal(err)
	}
	ev := rec.take()
	c := index(ev, 0, is("create s/active"))
	if c < 0 || index(ev, c, is("sync-dir s")) < 0 {
		t.Fatalf("a created append file's directory was not synced: %q", ev)
	}
	checkMkdirs(t, ev)
	af.Write([]byte("data"))
	if err := af.Sync(); err != nil {
		t.Fatal(err)
	}
	if ev := rec.take(); !slices.Equal(ev, []string{"sync-file s/active"}) {
		t.Fatalf("sync traced %q", ev)
	}
	if err := af.Truncate(2); err != nil {
		t.Fatal(err)
	}
	if ev := rec.take(); !slices.Equal(ev, []string{"sync-file s/active"}) {
		t.Fatalf("truncate traced %q", ev)
	}
	if _, err := af.Seal(ctx, "t/sealed"); err != nil {
		t.Fatal(err)
	}
	ev = rec.take()
	checkCommitted(t, ev, "t/sealed", is("sync-file s/active"))
	if index(ev, index(ev, 0, is("rename t/sealed")), is("sync-dir s")) < 0 {
		t.Fatalf("the old directory was not synced after the seal: %q", ev)
	}
}

var errInjected = errors.New("injected sync failure")

func TestFailedSyncs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b, rec := traced(t, root)
	mustPut(t, b, "dir/old", []byte("old"))

	// The file's sync fails: nothing becomes visible, the old object stays.
	rec.fail = func(op, p string) error {
		if op == "sync-file" {
			return errInjected
		}
		return nil
	}
	for _, key := range []string{"dir/new", "dir/old", "fresh/dir/new"} {
		if _, err := b.Put(ctx, key, []byte("new"), nil); !errors.Is(err, errInjected) {
			t.Fatalf("put %s with a failing file sync: %v", key, err)
		}
	}
	if got := mustRead(t, b, "dir/old"); string(got) != "old" {
		t.Fatalf("a failed put changed the old object: %q", got)
	}
	for _, key := range []string{"dir/new", "fresh/dir/new"} {
		if _, err := b.Stat(ctx, key); !blob.IsNotExist(err) {
			t.Fatalf("a failed put left %s: %v", key, err)
		}
	}
	if names := tmpFiles(t, root); len(names) != 0 {
		t.Fatalf("temporary files left: %v", names)
	}

	// A new directory's entry cannot be synced: the put fails before the
	// rename.
	rec.fail = func(op, p string) error {
		if op == "sync-dir" && p == "" {
			return errInjected
		}
		return nil
	}
	if _, err := b.Put(ctx, "other/k", []byte("x"), nil); !errors.Is(err, errInjected) {
		t.Fatalf("put with a failing parent sync: %v", err)
	}
	if _, err := b.Stat(ctx, "other/k"); !blob.IsNotExist(err) {
		t.Fatalf("a failed put left other/k: %v", err)
	}

	// The key's directory cannot be synced after the rename: the put
	// reports it (the object is visible, but not known to be durable).
	rec.fail = func(op, p string) error {
		if op == "sync-dir" && p == "dir" {
			return errInjected
		}
		return nil
	}
	if _, err := b.Put(ctx, "dir/late", []byte("x"), nil); !errors.Is(err, errInjected) {
		t.Fatalf("put with a failing directory sync: %v", err)
	}

	// Append syncs report their failures, and a failed seal leaves the file
	// open under its key.
	rec.fail = nil
	af, err := b.OpenAppend(ctx, "seg/active")
	if err != nil {
		t.Fatal(err)
	}
	af.Write([]byte("abc"))
	rec.fail = func(op, p string) error {
		if op == "sync-file" {
			return errInjected
		}
		return nil
	}
	if err := af.Sync(); !errors.Is(err, errInjected) {
		t.Fatalf("append sync: %v", err)
	}
	if _, err := af.Seal(ctx, "seg/sealed"); !errors.Is(err, errInjected) {
		t.Fatalf("seal: %v", err)
	}
	rec.fail = nil
	if _, err := b.Stat(ctx, "seg/sealed"); !blob.IsNotExist(err) {
		t.Fatalf("a failed seal renamed the file: %v", err)
	}
	af.Write([]byte("def"))
	if _, err := af.Seal(ctx, "seg/sealed"); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, b, "seg/sealed"); string(got) != "abcdef" {
		t.Fatalf("sealed %q", got)
	}
}

// TestNoSync: the unsafe option really skips every sync.
func TestNoSync(t *testing.T) {
	d, err := NewDriver(t.TempDir(), &Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	d.hook = rec.hook
	b := blob.NewBucket(d)
	defer b.Close()
	mustPut(t, b, "a/b", []byte("x"))
	af, err := b.OpenAppend(context.Background(), "c/d")
	if err != nil {
		t.Fatal(err)
	}
	af.Sync()
	af.Seal(context.Background(), "e/f")
	for _, e := range rec.take() {
		if strings.HasPrefix(e, "sync-") {
			t.Fatalf("NoSync synced: %q", e)
		}
	}
}
