package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
)

// writerSegments lists the sealed segments of one writer, in (epoch, seq)
// order.
func writerSegments(t *testing.T, b *blob.Bucket, log, writer string) []segment.Name {
	t.Helper()
	var out []segment.Name
	for a, err := range b.List(context.Background(), layout.WriterSegments(log, writer)) {
		if err != nil {
			t.Fatal(err)
		}
		n, err := segment.ParseName(a.Key)
		if err != nil {
			t.Fatal(err)
		}
		if !n.Active {
			out = append(out, n)
		}
	}
	return out
}

// expectedPattern is the key a reader names for a missing segment: its name
// up to the ts range it cannot know.
func expectedPattern(n segment.Name) string {
	n.Active = true
	base := n.Base()
	return layout.WriterSegments(n.LogID, n.WriterID) + strings.TrimSuffix(base, segment.ActiveExt) + "-*" + segment.SealedExt
}

// A segment deleted from the start, the middle or the end of a writer's
// sequence: verify, dump and apply exit 1 naming the writer, the epoch and
// the key expected, where they used to exit 0 with the rows missing.
func TestMissingSegmentFailsVerifyDumpApply(t *testing.T) {
	for _, storage := range []string{"local", "mem"} {
		for _, where := range []string{"start", "middle", "end"} {
			t.Run(storage+"/"+where, func(t *testing.T) {
				ctx := context.Background()
				store := memName(t)
				if storage == "local" {
					store = t.TempDir()
				}
				log := "chain"
				genLog(t, store, log, "--writers", "2", "--rows", "6000")
				url := store
				if storage == "local" {
					url = fileURL(store)
				}
				b, err := blob.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				segs := writerSegments(t, b, log, "w1")
				if len(segs) < 3 {
					t.Fatalf("want at least 3 segments of w1, got %d", len(segs))
				}
				victim := segs[len(segs)/2]
				switch where {
				case "start":
					victim = segs[0]
				case "end":
					victim = segs[len(segs)-1]
				}
				if storage == "local" {
					// Removed behind the store's back, as a lost file is.
					if err := os.Remove(filepath.Join(store, filepath.FromSlash(victim.Format()))); err != nil {
						t.Fatal(err)
					}
				} else if err := b.Delete(ctx, victim.Format()); err != nil {
					t.Fatal(err)
				}
				want := []string{expectedPattern(victim), `writer "w1" epoch 1`}

				r := cli(t, "verify", "--storage", store, "--log", log)
				wantCode(t, r, 1)
				mustContain(t, "verify", r.stdout, append(want, "incomplete", "FAILED")...)
				r = cli(t, "dump", "--storage", store, "--log", log)
				wantCode(t, r, 1)
				mustContain(t, "dump stderr", r.stderr, want...)
				r = cli(t, "apply", "--storage", store, "--log", log, "--sink", "sqlite://"+filepath.Join(t.TempDir(), "down.db"))
				wantCode(t, r, 1)
				mustContain(t, "apply stderr", r.stderr, want...)
			})
		}
	}
}

// After GC up to the checkpoint, the log still verifies, dumps and applies
// from the checkpoint: the chain's lowest remaining link proves that what GC
// removed was below it.
func TestGCThenVerifyDumpApply(t *testing.T) {
	store := memName(t)
	log := "gcchain"
	genLog(t, store, log, "--writers", "2", "--rows", "6000")
	ctx := context.Background()
	b, err := blob.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The downstream applied everything; the checkpoint it reports lags.
	db := "sqlite://" + filepath.Join(t.TempDir(), "down.db")
	wantCode(t, cli(t, "apply", "--storage", store, "--log", log, "--sink", db), 0)
	before := writerSegments(t, b, log, "w1")
	// The checkpoint in the middle of w1's segments that hold events: a
	// segment object holding only a progress frame is named [0, 0] (on an
	// object store, a flush's frame goes out alone when its other objects
	// are still uploading, and stage cuts make more flushes).
	var held []segment.Name
	for _, n := range before {
		if n.MaxTs > 0 {
			held = append(held, n)
		}
	}
	cp := held[len(held)/2].MinTs
	c, err := meta.OpenCoordinator(ctx, b, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetCheckpoint(ctx, cp); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "gc", "--storage", store, "--log", log, "--yes")
	wantCode(t, r, 0)
	if after := writerSegments(t, b, log, "w1"); len(after) >= len(before) {
		t.Fatalf("GC deleted nothing of w1 (%d segments before, %d after)", len(before), len(after))
	}
	r = cli(t, "verify", "--storage", store, "--log", log)
	wantCode(t, r, 0)
	r = cli(t, "dump", "--storage", store, "--log", log)
	wantCode(t, r, 0)
	r = cli(t, "apply", "--storage", store, "--log", log, "--sink", db)
	wantCode(t, r, 0)
	// From below the checkpoint the range needs what GC removed: an error,
	// not a short dump.
	r = cli(t, "dump", "--storage", store, "--log", log, "--start-ts", "0")
	wantCode(t, r, 1)
	mustContain(t, "dump stderr", r.stderr, "incomplete", `writer "w1" epoch 1`)
}

// A name the log never writes, one that is not UTF-8, and a seg folder that
// is a symbolic link each fail verify, naming the object.
func TestVerifyStrayNames(t *testing.T) {
	dir := t.TempDir()
	log := "lg"
	genLog(t, dir, log, "--writers", "1")
	junk := filepath.Join(dir, log, "seg", "junk")
	if err := os.WriteFile(junk, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "verify", "--storage", dir, "--log", log)
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "bad-name", log+"/seg/junk")
	if err := os.Remove(junk); err != nil {
		t.Fatal(err)
	}

	// A segment whose name was damaged into invalid UTF-8.
	b, err := blob.Open(context.Background(), fileURL(dir))
	if err != nil {
		t.Fatal(err)
	}
	segs := writerSegments(t, b, log, "w1")
	b.Close()
	victim := filepath.Join(dir, filepath.FromSlash(segs[0].Format()))
	damaged := filepath.Join(filepath.Dir(victim), "\xff"+filepath.Base(victim)[1:])
	if err := os.Rename(victim, damaged); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "verify", "--storage", dir, "--log", log)
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "FAILED", fmt.Sprintf("%q", log+"/seg/w1/\xff"+filepath.Base(victim)[1:]))
	if err := os.Rename(damaged, victim); err != nil {
		t.Fatal(err)
	}

	// The seg folder moved away and replaced by a symbolic link to it.
	segDir := filepath.Join(dir, log, "seg")
	moved := filepath.Join(t.TempDir(), "seg")
	if err := os.Rename(segDir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, segDir); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "verify", "--storage", dir, "--log", log)
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "FAILED", log+"/seg")
	if !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 2 && f[0] == "error" && f[1] == "stray" && f[2] == log+"/seg"
	}) {
		t.Fatalf("verify did not name the linked seg folder:\n%s", r.stdout)
	}
}
