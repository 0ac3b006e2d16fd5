package blobtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
)

func TestLiarKeepsCapabilities(t *testing.T) {
	if blobtest.NewLiar(memDriver(), blobtest.Schedule{}).Bucket().CanAppend() {
		t.Error("a Liar over mem claims the Appender capability")
	}
	if !blobtest.NewLiar(localDriver(t), blobtest.Schedule{}).Bucket().CanAppend() {
		t.Error("a Liar over local lacks the Appender capability")
	}
	if _, ok := blobtest.NewLiar(localDriver(t), blobtest.Schedule{}).Driver().(driver.Stager); !ok {
		t.Error("a Liar over local is no Stager")
	}
}

func TestClassifyKey(t *testing.T) {
	for key, want := range map[string]blobtest.PutKind{
		"log/seg/w1/0000000001-0000000001.active": blobtest.KindSegment,
		"p/log/writers/w1":                        blobtest.KindState,
		"log/meta":                                blobtest.KindMeta,
		"log/deleting":                            blobtest.KindOther,
	} {
		if got := blobtest.ClassifyKey(key); got != want {
			t.Errorf("ClassifyKey(%q) = %s, want %s", key, got, want)
		}
	}
}

// TestLiarLostAnswerStores: every put the schedule loses is stored and
// answered with an error of one of the three forms; every refused one is not
// stored; the rest succeed.
func TestLiarLostAnswerStores(t *testing.T) {
	ctx := context.Background()
	l := blobtest.NewLiar(memDriver(), blobtest.Schedule{Seed: 3, LostAnswer: 0.3, Fail: 0.2})
	b := l.Bucket()
	var lost, refused, ok int
	forms := map[blob.Code]int{}
	for i := range 400 {
		key := fmt.Sprintf("log/writers/w%d", i)
		_, err := b.Put(ctx, key, []byte("x"), &blob.PutOptions{IfNotExist: true})
		exists, xerr := b.Exists(ctx, key)
		if xerr != nil {
			// Stat may not lie: ReadFail is 0.
			t.Fatalf("exists %s: %v", key, xerr)
		}
		switch {
		case err == nil:
			ok++
			if !exists {
				t.Fatalf("put %s succeeded but stored nothing", key)
			}
		case errors.Is(err, blobtest.ErrLostAnswer):
			lost++
			forms[blob.CodeOf(err)]++
			if !exists {
				t.Fatalf("put %s: lost answer but nothing stored", key)
			}
		case errors.Is(err, blobtest.ErrRefused):
			refused++
			if exists {
				t.Fatalf("put %s refused but stored", key)
			}
		default:
			t.Fatalf("put %s: %v", key, err)
		}
	}
	if lost < 80 || refused < 40 || ok < 150 {
		t.Fatalf("lost %d, refused %d, ok %d of 400: the schedule's shares are off", lost, refused, ok)
	}
	for _, c := range []blob.Code{blob.CodeTransient, blob.CodeDeadlineExceeded, blob.CodePreconditionFailed} {
		if forms[c] == 0 {
			t.Errorf("no lost answer reported as %v (%v)", c, forms)
		}
	}
	if got := l.Count(blobtest.ActFail); got != refused {
		t.Errorf("Count(fail) = %d, want %d", got, refused)
	}
	if got := l.Counts()["state/"+string(blobtest.ActLostPrecondition)]; got != forms[blob.CodePreconditionFailed] {
		t.Errorf("state/lost-precondition = %d, want %d", got, forms[blob.CodePreconditionFailed])
	}
}

// TestLiarDeterministic: the same seed makes the same decisions.
func TestLiarDeterministic(t *testing.T) {
	run := func(seed uint64) string {
		l := blobtest.NewLiar(memDriver(), blobtest.Schedule{Seed: seed, LostAnswer: 0.2, Fail: 0.2, Kinds: []blobtest.PutKind{blobtest.KindSegment}})
		b := l.Bucket()
		out := ""
		for i := range 50 {
			_, err := b.Put(context.Background(), fmt.Sprintf("log/seg/w/%d", i%7), []byte("x"), nil)
			out += fmt.Sprint(err != nil)
			// Meta puts are not subject to this schedule.
			if _, err := b.Put(context.Background(), "log/meta", []byte("m"), nil); err != nil {
				panic(err)
			}
		}
		return out + l.Summary()
	}
	if a, b := run(9), run(9); a != b {
		t.Fatalf("seed 9 ran two ways:\n%s\n%s", a, b)
	}
	if run(9) == run(10) {
		t.Fatal("seeds 9 and 10 made the same decisions")
	}
}

func TestLiarTakeoverKind(t *testing.T) {
	l := blobtest.NewLiar(memDriver(), blobtest.Schedule{Seed: 1, LostAnswer: 1, Kinds: []blobtest.PutKind{blobtest.KindTakeover}})
	b := l.Bucket()
	if _, err := b.Put(context.Background(), "log/writers/w", []byte("x"), nil); err != nil {
		t.Fatalf("a plain state put was lost: %v", err)
	}
	if _, err := b.Put(blobtest.WithTakeover(context.Background()), "log/writers/w", []byte("y"), nil); !errors.Is(err, blobtest.ErrLostAnswer) {
		t.Fatalf("a takeover put: %v, want a lost answer", err)
	}
	l.SetLying(false)
	if _, err := b.Put(blobtest.WithTakeover(context.Background()), "log/writers/w", []byte("z"), nil); err != nil {
		t.Fatalf("with lying off: %v", err)
	}
}

func TestLiarBrokenModes(t *testing.T) {
	ctx := context.Background()
	l := blobtest.NewLiar(memDriver(), blobtest.Schedule{Seed: 1, LostAnswer: 1, Broken: blobtest.BrokenMisreport})
	b := l.Bucket()
	if _, err := b.Put(ctx, "log/seg/w/1", []byte("x"), nil); err != nil {
		t.Fatalf("misreported put: %v", err)
	}
	if ok, _ := b.Exists(ctx, "log/seg/w/1"); ok {
		t.Fatal("a misreported put stored its object")
	}

	l = blobtest.NewLiar(memDriver(), blobtest.Schedule{Seed: 1, Broken: blobtest.BrokenListSkip, ListSkip: 1})
	b = l.Bucket()
	for i := range 3 {
		if _, err := b.Put(ctx, fmt.Sprintf("log/seg/w/%d", i), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, err := range b.List(ctx, "log/seg/") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 2 || l.Count(blobtest.ActListSkip) != 1 {
		t.Fatalf("listed %d of 3, %d skips: want 2 and 1", n, l.Count(blobtest.ActListSkip))
	}
}

// TestLiarSkipRecent: the newest object of every writer's folder is left out.
func TestLiarSkipRecent(t *testing.T) {
	ctx := context.Background()
	l := blobtest.NewLiar(memDriver(), blobtest.Schedule{Seed: 1, Broken: blobtest.BrokenListSkip, ListSkip: 1, SkipRecent: true})
	b := l.Bucket()
	for _, k := range []string{"log/seg/a/1", "log/seg/a/2", "log/seg/a/3", "log/seg/b/1", "log/seg/c/1", "log/seg/c/2"} {
		if _, err := b.Put(ctx, k, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for a, err := range b.List(ctx, "log/seg/") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Key)
	}
	if want := "[log/seg/a/1 log/seg/a/3 log/seg/b/1 log/seg/c/2]"; fmt.Sprint(got) != want {
		t.Fatalf("listed %v, want %s", got, want)
	}
}
