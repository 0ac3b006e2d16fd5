//go:build unix

package local

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/testenv"
)

// Child processes are this test binary, started again by startChild:
// TestMain sends them to runChild instead of the tests.
func TestMain(m *testing.M) {
	testenv.RunChild("local", func(args []string) error {
		if len(args) != 3 {
			return fmt.Errorf("want mode, root and argument, got %q", args)
		}
		return runChild(args[0], args[1], args[2])
	})
	os.Exit(m.Run())
}

// runChild does a child's job, talking to its parent by lines: commands on
// stdin, results on stdout (unbuffered, so a printed line is an
// acknowledgement of what came before it).
func runChild(mode, root, arg string) error {
	ctx := context.Background()
	b, err := New(root, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	in := bufio.NewScanner(os.Stdin)
	switch mode {
	case "create":
		// Race for each key read from stdin with a conditional create of
		// arg (the child's id).
		fmt.Println("ready")
		for in.Scan() {
			_, err := b.Put(ctx, in.Text(), []byte(arg), &blob.PutOptions{IfNotExist: true})
			switch {
			case err == nil:
				fmt.Println("won")
			case blob.IsPreconditionFailed(err):
				fmt.Println("lost")
			default:
				return err
			}
		}
	case "cas":
		// Increment "counter" arg times by compare-and-swap, on "go".
		n, _ := strconv.Atoi(arg)
		fmt.Println("ready")
		in.Scan()
		for range n {
			if err := increment(ctx, b, "counter"); err != nil {
				return err
			}
		}
		fmt.Println("done")
	case "hold":
		// Hold the key arg open for appending until stdin closes.
		af, err := b.OpenAppend(ctx, arg)
		if err != nil {
			return err
		}
		fmt.Println("ready")
		for in.Scan() {
		}
		return af.Close()
	case "crash":
		seed, _ := strconv.ParseUint(arg, 10, 64)
		return crashChild(ctx, b, seed)
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	return in.Err()
}

// startChild starts a child process doing mode's job on root.
func startChild(t *testing.T, mode, root, arg string) *testenv.Child {
	t.Helper()
	return testenv.StartChild(t, "local", []string{mode, root, arg})
}

// wantReady reads the child's first line, which must be "ready".
func wantReady(t *testing.T, c *testenv.Child) {
	t.Helper()
	if l := c.Line(t); l != "ready" {
		t.Fatalf("child said %q", l)
	}
}

// openRoot opens root in this process, closed when the test ends.
func openRoot(t *testing.T, root string) *blob.Bucket {
	t.Helper()
	b, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestCrossProcessIfNotExist races conditional creates of the same keys from
// several processes: exactly one wins each key, and its bytes are there.
func TestCrossProcessIfNotExist(t *testing.T) {
	root := t.TempDir()
	const procs, rounds = 6, 8
	var cs []*testenv.Child
	for i := range procs {
		cs = append(cs, startChild(t, "create", root, strconv.Itoa(i)))
	}
	for _, c := range cs {
		wantReady(t, c)
	}
	b := openRoot(t, root)
	for r := range rounds {
		key := fmt.Sprintf("race/%d", r)
		for _, c := range cs {
			c.Send(t, key)
		}
		var winners []int
		for i, c := range cs {
			switch l := c.Line(t); l {
			case "won":
				winners = append(winners, i)
			case "lost":
			default:
				t.Fatalf("child %d said %q", i, l)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("%s: winners %v, want exactly one", key, winners)
		}
		if got := mustRead(t, b, key); string(got) != strconv.Itoa(winners[0]) {
			t.Fatalf("%s holds %q; child %d won", key, got, winners[0])
		}
	}
	for _, c := range cs {
		c.Finish(t)
	}
}

// TestCrossProcessIfMatch has several processes increment one counter by
// compare-and-swap: no increment is lost.
func TestCrossProcessIfMatch(t *testing.T) {
	root := t.TempDir()
	b := openRoot(t, root)
	mustPut(t, b, "counter", []byte("0"))
	const procs, incs = 4, 15
	var cs []*testenv.Child
	for range procs {
		cs = append(cs, startChild(t, "cas", root, strconv.Itoa(incs)))
	}
	for _, c := range cs {
		c.Line(t)
	}
	for _, c := range cs {
		c.Send(t, "go")
	}
	for _, c := range cs {
		if l := c.Line(t); l != "done" {
			t.Fatalf("child said %q", l)
		}
		c.Finish(t)
	}
	if got := mustRead(t, b, "counter"); string(got) != strconv.Itoa(procs*incs) {
		t.Fatalf("counter = %s, want %d", got, procs*incs)
	}
}

// TestCrossProcessAppendLock: a key open for appending in one process cannot
// be opened for appending in another until it is closed.
func TestCrossProcessAppendLock(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	c := startChild(t, "hold", root, "seg/active")
	wantReady(t, c)
	b := openRoot(t, root)
	_, err := b.OpenAppend(ctx, "seg/active")
	wantCode(t, err, blob.CodePreconditionFailed, "append to a key another process appends to")
	c.Finish(t)
	af, err := b.OpenAppend(ctx, "seg/active")
	if err != nil {
		t.Fatal(err)
	}
	af.Close()
}

// The crash child's deterministic content: a byte of segment seg at offset
// off, object n, and version m of the meta object (whose first 8 bytes are
// m, so a reader can tell which version it holds).
func streamByte(seg int, off int64) byte { return byte(off*131 + int64(seg)*7 + off>>12) }

func streamBytes(seg int, off int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = streamByte(seg, off+int64(i))
	}
	return b
}

func objBytes(n int) []byte {
	b := make([]byte, 1+(n*7919)%(256<<10))
	for j := range b {
		b[j] = byte(n*13 + j*17 + j>>9)
	}
	return b
}

func metaBytes(m int) []byte {
	b := make([]byte, 8+1000+(m*37)%50000)
	binary.BigEndian.PutUint64(b, uint64(m))
	for j := 8; j < len(b); j++ {
		b[j] = byte(m + j*3)
	}
	return b
}

func activeKey(seg int) string { return fmt.Sprintf("seg/active-%03d", seg) }
func sealedKey(seg int) string { return fmt.Sprintf("seg/sealed-%03d", seg) }
func objKey(n int) string      { return fmt.Sprintf("objs/%06d", n) }

// crashChild appends to a segment, syncs it, seals it, puts new objects
// (unconditionally and if-not-exist) and overwrites one, forever, printing
// each acknowledged step, until its parent kills it.
func crashChild(ctx context.Context, b *blob.Bucket, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 1))
	seg, n, m := 0, 0, 0
	af, err := b.OpenAppend(ctx, activeKey(seg))
	if err != nil {
		return err
	}
	for {
		k := 1 + r.IntN(32<<10)
		if _, err := af.Write(streamBytes(seg, af.Size(), k)); err != nil {
			return err
		}
		switch r.IntN(8) {
		case 0, 1, 2:
			if err := af.Sync(); err != nil {
				return err
			}
			fmt.Printf("synced %d %d\n", seg, af.Size())
		case 3, 4:
			if _, err := b.Put(ctx, objKey(n), objBytes(n), &blob.PutOptions{IfNotExist: n%2 == 1}); err != nil {
				return err
			}
			fmt.Printf("put %d\n", n)
			n++
		case 5:
			if _, err := b.Put(ctx, "meta", metaBytes(m), nil); err != nil {
				return err
			}
			fmt.Printf("meta %d\n", m)
			m++
		case 6:
			if af.Size() < 256<<10 {
				break
			}
			size := af.Size()
			if _, err := af.Seal(ctx, sealedKey(seg)); err != nil {
				return err
			}
			fmt.Printf("sealed %d %d\n", seg, size)
			seg++
			if af, err = b.OpenAppend(ctx, activeKey(seg)); err != nil {
				return err
			}
		}
	}
}

// TestCrash kills a child process that appends, syncs, seals and puts at
// random moments, and checks what survived: every synced prefix, every
// sealed segment and every acknowledged object, whole; no partial object and
// no temporary file in sight. A SIGKILL keeps the page cache, so this proves
// atomicity, not the fsyncs (see TestPutSyncs for those).
func TestCrash(t *testing.T) {
	trials := testenv.Count(t, "REDOKIT_CRASH_TRIALS", 5)
	seed := testenv.Seed(t, "REDOKIT_CRASH_SEED", uint64(time.Now().UnixNano()))
	t.Logf("%d trials", trials)
	r := rand.New(rand.NewPCG(seed, 0))
	for trial := range trials {
		root := t.TempDir()
		c := startChild(t, "crash", root, strconv.FormatUint(r.Uint64(), 10))
		var acks []string
		for killAfter := 1 + r.IntN(80); len(acks) < killAfter; {
			acks = append(acks, c.Line(t))
		}
		// A random pause spreads the kills over the child's next steps
		// (without it they land at the start of the step after an ack).
		// It waits for no condition: it picks a moment.
		time.Sleep(time.Duration(r.IntN(4000)) * time.Microsecond)
		if err := c.Kill(); err != nil {
			t.Fatal(err)
		}
		// Lines written before the kill landed are acknowledgements too.
		for l := range c.Lines {
			acks = append(acks, l)
		}
		err := c.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("trial %d: the child did not die of the kill: %v: %s", trial, err, c.Stderr())
		}
		verifyCrash(t, trial, root, acks)
	}
}

var (
	segRE = regexp.MustCompile(`^seg/(active|sealed)-(\d{3})$`)
	objRE = regexp.MustCompile(`^objs/(\d{6})$`)
)

func verifyCrash(t *testing.T, trial int, root string, acks []string) {
	t.Helper()
	ctx := context.Background()
	synced := map[int]int64{} // segment: last synced size
	sealed := map[int]int64{} // segment: sealed size
	puts := map[int]bool{}
	lastMeta := -1
	for _, l := range acks {
		f := strings.Fields(l)
		a, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "synced":
			synced[a], _ = strconv.ParseInt(f[2], 10, 64)
		case "sealed":
			sealed[a], _ = strconv.ParseInt(f[2], 10, 64)
		case "put":
			puts[a] = true
		case "meta":
			lastMeta = a
		default:
			t.Fatalf("trial %d: child said %q", trial, l)
		}
	}
	b, err := New(root, nil) // one per trial: closed at its end
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("trial %d (acks %q): %s", trial, acks, fmt.Sprintf(format, args...))
	}
	segLen := map[string]int64{}
	for _, key := range listKeys(t, b, "", 0) {
		data := mustRead(t, b, key)
		switch {
		case segRE.MatchString(key):
			s, _ := strconv.Atoi(segRE.FindStringSubmatch(key)[2])
			if !bytes.Equal(data, streamBytes(s, 0, len(data))) {
				fail("%s is not a prefix of its stream (%d bytes)", key, len(data))
			}
			segLen[key] = int64(len(data))
		case objRE.MatchString(key):
			n, _ := strconv.Atoi(objRE.FindStringSubmatch(key)[1])
			if !bytes.Equal(data, objBytes(n)) {
				fail("%s holds %d bytes, not its whole content (%d bytes)", key, len(data), len(objBytes(n)))
			}
		case key == "meta":
			if len(data) < 8 {
				fail("meta is torn: %d bytes", len(data))
			}
			m := int(binary.BigEndian.Uint64(data))
			if !bytes.Equal(data, metaBytes(m)) || m < lastMeta {
				fail("meta holds version %d (%d bytes), not a whole version ≥ %d", m, len(data), lastMeta)
			}
		default:
			fail("unexpected key %q (a temporary file?)", key)
		}
	}
	for s, size := range synced {
		a, aok := segLen[activeKey(s)]
		z, zok := segLen[sealedKey(s)]
		switch {
		case aok == zok:
			fail("segment %d: active %v, sealed %v; want exactly one", s, aok, zok)
		case max(a, z) < size:
			fail("segment %d holds %d bytes, but %d were synced", s, max(a, z), size)
		}
	}
	for s, size := range sealed {
		if _, ok := segLen[activeKey(s)]; ok || segLen[sealedKey(s)] != size {
			fail("sealed segment %d: %d bytes (want %d), active still there: %v", s, segLen[sealedKey(s)], size, ok)
		}
	}
	for n := range puts {
		if _, err := b.Stat(ctx, objKey(n)); err != nil {
			fail("acknowledged object %d: %v", n, err)
		}
	}
	if lastMeta >= 0 {
		if _, err := b.Stat(ctx, "meta"); err != nil {
			fail("acknowledged meta: %v", err)
		}
	}
	// The next writer sweeps the temporary files the killed one left.
	orphans := len(tmpFiles(t, root))
	mustPut(t, b, "after-crash", nil)
	if names := tmpFiles(t, root); len(names) != 0 {
		fail("temporary files left after the sweep: %v", names)
	}
	if err := b.Delete(ctx, "after-crash"); err != nil {
		t.Fatal(err)
	}
	t.Logf("trial %d: %d acknowledgements (%d segment files, %d objects put), all intact; %d orphaned temporary files swept", trial, len(acks), len(segLen), len(puts), orphans)
}
