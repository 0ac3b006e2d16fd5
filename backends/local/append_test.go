//go:build unix

package local

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

func TestAppend(t *testing.T) {
	ctx := context.Background()
	b, d := newBucket(t, nil)
	if !b.CanAppend() {
		t.Fatal("the local bucket cannot append")
	}
	af, err := b.OpenAppend(ctx, "seg/a")
	if err != nil {
		t.Fatal(err)
	}
	if af.Size() != 0 {
		t.Fatalf("new file size %d", af.Size())
	}
	if n, err := af.Write([]byte("hello")); n != 5 || err != nil {
		t.Fatalf("write: %d, %v", n, err)
	}
	if err := af.Sync(); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Stat(ctx, "seg/a"); err != nil || st.Size != 5 || af.Size() != 5 {
		t.Fatalf("stat %+v, %v; Size %d", st, err, af.Size())
	}
	// Readable while open; one appender at a time.
	if got := mustRead(t, b, "seg/a"); string(got) != "hello" {
		t.Fatalf("read while appending: %q", got)
	}
	_, err = b.OpenAppend(ctx, "seg/a")
	wantCode(t, err, blob.CodePreconditionFailed, "a second appender")
	if err := af.Close(); err != nil {
		t.Fatal(err)
	}
	if err := af.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := af.Write([]byte("x")); err == nil {
		t.Fatal("write after close succeeded")
	}

	// Reopening keeps the bytes and appends after them.
	af, err = b.OpenAppend(ctx, "seg/a")
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	if af.Size() != 5 {
		t.Fatalf("reopened size %d", af.Size())
	}
	af.Write([]byte(" world"))
	if got := mustRead(t, b, "seg/a"); string(got) != "hello world" {
		t.Fatalf("after reopen: %q", got)
	}
	if err := af.Truncate(5); err != nil || af.Size() != 5 {
		t.Fatalf("truncate: %v, size %d", err, af.Size())
	}
	if err := af.Truncate(-1); blob.CodeOf(err) != blob.CodeInvalidArgument {
		t.Fatalf("negative truncate: %v", err)
	}
	af.Write([]byte("!"))
	if got := mustRead(t, b, "seg/a"); string(got) != "hello!" {
		t.Fatalf("after truncate: %q", got)
	}
	before, _ := b.Stat(ctx, "seg/a")

	// Seal never replaces; a lost seal leaves the file open under its key.
	mustPut(t, b, "sealed/taken", []byte("taken"))
	_, err = af.Seal(ctx, "sealed/taken")
	wantCode(t, err, blob.CodePreconditionFailed, "seal onto an existing key")
	if got := mustRead(t, b, "sealed/taken"); string(got) != "taken" {
		t.Fatalf("a lost seal changed the target: %q", got)
	}
	af.Write([]byte("?"))
	a, err := af.Seal(ctx, "sealed/x/y")
	if err != nil {
		t.Fatal(err)
	}
	if a.Key != "sealed/x/y" || a.Size != 7 || a.ETag == before.ETag {
		t.Fatalf("seal attrs %+v (ETag before %s)", a, before.ETag)
	}
	if st, err := b.Stat(ctx, "sealed/x/y"); err != nil || st != a {
		t.Fatalf("stat after seal %+v, %v; seal said %+v", st, err, a)
	}
	if got := mustRead(t, b, "sealed/x/y"); string(got) != "hello!?" {
		t.Fatalf("sealed content %q", got)
	}
	if _, err := b.Stat(ctx, "seg/a"); !blob.IsNotExist(err) {
		t.Fatalf("the sealed file is still under its old key: %v", err)
	}
	if _, err := af.Write([]byte("x")); err == nil {
		t.Fatal("write after seal succeeded")
	}
	// The sealed file is no longer locked for appending.
	af2, err := b.OpenAppend(ctx, "sealed/x/y")
	if err != nil {
		t.Fatal(err)
	}
	af2.Close()

	// Appending to a key in the way of other keys, or to a stranger, fails.
	if err := unix.Mkfifo(d.Root()+"/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = b.OpenAppend(ctx, "fifo")
	wantCode(t, err, blob.CodeInvalidArgument, "append to a fifo")
	_, err = b.OpenAppend(ctx, "sealed")
	wantCode(t, err, blob.CodeInvalidArgument, "append over a directory of keys")
}

// TestStartWriteback passes the write-back hint through the Bucket to the
// file: it succeeds on an open file, names the key when the system refuses
// the range, and fails once the file is closed.
func TestStartWriteback(t *testing.T) {
	ctx := context.Background()
	b, _ := newBucket(t, nil)
	af, err := b.OpenAppend(ctx, "seg/wb")
	if err != nil {
		t.Fatal(err)
	}
	ws, ok := af.(blob.WritebackStarter)
	if !ok {
		t.Fatalf("the bucket's append file %T does not pass write-back hints on", af)
	}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if _, err := af.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := ws.StartWriteback(0, int64(len(data))); err != nil {
		t.Fatalf("start write-back: %v", err)
	}
	if err := af.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := mustRead(t, b, "seg/wb"); len(got) != len(data) {
		t.Fatalf("read %d bytes back, wrote %d", len(got), len(data))
	}
	if runtime.GOOS == "linux" {
		err := ws.StartWriteback(-1, 10)
		if err == nil || !strings.Contains(err.Error(), "seg/wb") {
			t.Fatalf("a negative offset: %v, want an error naming seg/wb", err)
		}
	}
	if err := af.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ws.StartWriteback(0, 1); err == nil {
		t.Fatal("start write-back on a closed file succeeded")
	}
}
