package blobtest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
)

func TestMetadataKind(t *testing.T) {
	for key, want := range map[string]blobtest.PutKind{
		"log/meta":            blobtest.KindMeta,
		"p/q/log/meta":        blobtest.KindMeta,
		"log/writers/w1":      blobtest.KindState,
		"p/log/writers/w1":    blobtest.KindState,
		"writers/w1":          blobtest.KindOther, // no log ID
		"meta":                blobtest.KindOther,
		"log/seg/w1/x.active": blobtest.KindOther,
		"log/writers/w1/x":    blobtest.KindOther,
		"log/~deleting":       blobtest.KindOther,
		"log/metadata":        blobtest.KindOther,
	} {
		if got := blobtest.MetadataKind(key); got != want {
			t.Errorf("MetadataKind(%q) = %s, want %s", key, got, want)
		}
	}
}

// put writes n versions of key through b, each by compare-and-swap, and
// returns their ETags and bodies.
func putVersions(t *testing.T, b *blob.Bucket, key string, n int) (etags []string, bodies []string) {
	t.Helper()
	ctx := context.Background()
	prev := ""
	for i := range n {
		body := fmt.Sprintf("version %d of %s", i, key)
		o := &blob.PutOptions{IfNotExist: true}
		if prev != "" {
			o = &blob.PutOptions{IfMatch: prev}
		}
		a, err := b.Put(ctx, key, []byte(body), o)
		if err != nil {
			t.Fatal(err)
		}
		prev = a.ETag
		etags, bodies = append(etags, a.ETag), append(bodies, body)
	}
	return etags, bodies
}

// call is one answer of a stat-read-stat of a metadata object.
type call struct {
	before, after, body string
}

func statReadStat(t *testing.T, b *blob.Bucket, key string) call {
	t.Helper()
	ctx := context.Background()
	a, err := b.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	z, err := b.Stat(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return call{a.ETag, z.ETag, string(data)}
}

// TestStaleConsistent: a consistent window answers one older version, its
// ETag and its body, throughout; a compare-and-swap on that ETag fails at
// the store.
func TestStaleConsistent(t *testing.T) {
	st := blobtest.NewStale(memDriver(), blobtest.StaleSchedule{Seed: 1, Start: 1, Calls: 1 << 20})
	b := st.Bucket()
	etags, bodies := putVersions(t, b, "log/meta", 4)
	c := statReadStat(t, b, "log/meta")
	i := slices.Index(bodies, c.body)
	if i < 0 || i == 3 || c.before != etags[i] || c.after != etags[i] {
		t.Fatalf("got %+v: want an older version with its own ETag (versions %q)", c, etags)
	}
	if _, err := b.Put(context.Background(), "log/meta", []byte("x"), &blob.PutOptions{IfMatch: c.before}); !blob.IsPreconditionFailed(err) {
		t.Fatalf("a compare-and-swap on the stale ETag: %v, want precondition failed", err)
	}
	if st.Serves() == 0 || st.Counts()["meta/"+string(blobtest.ActStaleStat)] == 0 {
		t.Fatalf("counts %v", st.Counts())
	}
}

// TestStaleTorn: a torn window answers the current ETag with an older body,
// so a compare-and-swap on it lands and writes back what came from the old
// body.
func TestStaleTorn(t *testing.T) {
	st := blobtest.NewStale(memDriver(), blobtest.StaleSchedule{Seed: 1, Start: 1, Calls: 1 << 20, Torn: 1})
	b := st.Bucket()
	etags, bodies := putVersions(t, b, "log/writers/w1", 3)
	c := statReadStat(t, b, "log/writers/w1")
	if c.before != etags[2] || c.after != etags[2] || c.body == bodies[2] || !slices.Contains(bodies, c.body) {
		t.Fatalf("got %+v: want the current ETag %s with an older body", c, etags[2])
	}
	if _, err := b.Put(context.Background(), "log/writers/w1", []byte("lost update"), &blob.PutOptions{IfMatch: c.before}); err != nil {
		t.Fatalf("a compare-and-swap on the torn pair's ETag: %v, want success", err)
	}
	if st.Counts()["state/"+string(blobtest.ActStaleTorn)] == 0 {
		t.Fatalf("counts %v", st.Counts())
	}
}

// TestStaleWindows: windows open, last a bounded number of calls and close;
// the newest version is answered outside them; segments and other keys
// are never touched; SetServing(false) stops it.
func TestStaleWindows(t *testing.T) {
	st := blobtest.NewStale(memDriver(), blobtest.StaleSchedule{Seed: 9, Start: 0.2, Calls: 4})
	b := st.Bucket()
	ctx := context.Background()
	etags, bodies := putVersions(t, b, "log/meta", 5)
	segEtags, _ := putVersions(t, b, "log/seg/w1/x", 3)
	stale, fresh := 0, 0
	for range 300 {
		data, err := b.ReadAll(ctx, "log/meta")
		if err != nil {
			t.Fatal(err)
		}
		if string(data) == bodies[4] {
			fresh++
		} else {
			stale++
		}
		a, err := b.Stat(ctx, "log/seg/w1/x")
		if err != nil || a.ETag != segEtags[2] {
			t.Fatalf("a segment's stat answered %v, %v", a.ETag, err)
		}
	}
	if stale == 0 || fresh == 0 {
		t.Fatalf("%d stale and %d fresh reads: want both", stale, fresh)
	}
	st.SetServing(false)
	for range 50 {
		if c := statReadStat(t, b, "log/meta"); c.body != bodies[4] || c.before != etags[4] {
			t.Fatalf("served %+v with serving off", c)
		}
	}
	t.Logf("%d stale, %d fresh; counts %v", stale, fresh, st.Counts())
}

// TestStaleReplays: the same seed and the same calls give the same
// answers.
func TestStaleReplays(t *testing.T) {
	run := func() []string {
		st := blobtest.NewStale(memDriver(), blobtest.StaleSchedule{Seed: 5, Start: 0.3, Calls: 5, Torn: 0.5})
		b := st.Bucket()
		var out []string
		for v := range 6 {
			putVersions(t, b, fmt.Sprintf("log/writers/w%d", v), v+1)
		}
		for i := range 200 {
			key := fmt.Sprintf("log/writers/w%d", i%6)
			c := statReadStat(t, b, key)
			out = append(out, c.body)
		}
		return out
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatal("two runs of one seed answered differently")
	}
}

// TestStaleLearns: a version another process wrote (straight to the store)
// is remembered when read whole, and served later.
func TestStaleLearns(t *testing.T) {
	inner := memDriver()
	other := blob.NewBucket(inner)
	st := blobtest.NewStale(inner, blobtest.StaleSchedule{Seed: 2})
	b := st.Bucket()
	ctx := context.Background()
	for i := range 3 {
		if _, err := other.Put(ctx, "log/meta", fmt.Appendf(nil, "v%d", i), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := b.ReadAll(ctx, "log/meta"); err != nil {
			t.Fatal(err)
		}
	}
	if n := st.Versions("log/meta"); n != 3 {
		t.Fatalf("remembers %d versions, want 3", n)
	}
}

// TestLiarStale: a Liar's Stale is an honest fault that SetLying(false)
// stops, unless the Liar is BrokenStale; its counts are the Liar's.
func TestLiarStale(t *testing.T) {
	for _, c := range []struct {
		s          blobtest.Schedule
		afterwards bool
	}{
		{blobtest.Schedule{Seed: 3, Stale: &blobtest.StaleSchedule{Seed: 3, Start: 1, Calls: 1 << 20}}, false},
		{blobtest.Schedule{Seed: 3, Broken: blobtest.BrokenStale}, true},
	} {
		l := blobtest.NewLiar(memDriver(), c.s)
		if l.Stale() == nil {
			t.Fatal("no Stale under the Liar")
		}
		b := l.Bucket()
		_, bodies := putVersions(t, b, "log/meta", 3)
		l.SetLying(false)
		stale := 0
		for range 100 {
			if statReadStat(t, b, "log/meta").body != bodies[2] {
				stale++
			}
		}
		if (stale > 0) != c.afterwards {
			t.Errorf("%+v: %d stale reads with lying off", c.s, stale)
		}
		if c.afterwards && l.Count(blobtest.ActStale)+l.Count(blobtest.ActStaleTorn) == 0 {
			t.Errorf("the Liar's counts lack the Stale's: %s", l.Summary())
		}
	}
	if _, ok := blobtest.NewLiar(localDriver(t), blobtest.Schedule{Broken: blobtest.BrokenStale}).Driver().(driver.Appender); !ok {
		t.Error("a stale Liar over local lost the Appender capability")
	}
}

// TestStaleConsistentPairs: consistent windows never pair an ETag with
// another version's body in a stat, read, stat of one client, whatever
// call a window opens or closes at; torn windows do.
func TestStaleConsistentPairs(t *testing.T) {
	for _, torn := range []float64{0, 1} {
		st := blobtest.NewStale(memDriver(), blobtest.StaleSchedule{Seed: 11, Start: 0.4, Calls: 2, Torn: torn})
		b := st.Bucket()
		etags, bodies := putVersions(t, b, "log/meta", 4)
		mismatched := 0
		for i := range 500 {
			ctx, cancel := context.WithCancel(context.Background())
			a, err := b.Stat(ctx, "log/meta")
			if err != nil {
				t.Fatal(err)
			}
			data, err := b.ReadAll(ctx, "log/meta")
			if err != nil {
				t.Fatal(err)
			}
			z, err := b.Stat(ctx, "log/meta")
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			if a.ETag != z.ETag {
				continue // a client retries this one
			}
			if j := slices.Index(etags, a.ETag); bodies[j] != string(data) {
				mismatched++
				if torn == 0 {
					t.Fatalf("triple %d: ETag %s (version %d) with the body %q", i, a.ETag, j, data)
				}
			}
		}
		if torn == 1 && mismatched == 0 {
			t.Fatal("torn windows never paired the current ETag with an old body")
		}
	}
}

// TestLiarListLag: a lagging listing leaves out the two newest segments of
// each writer, except under a takeover's context, and not once lying is off.
func TestLiarListLag(t *testing.T) {
	l := blobtest.NewLiar(memDriver(), blobtest.Schedule{Seed: 1, ListLag: 1})
	b := l.Bucket()
	ctx := context.Background()
	for _, k := range []string{"log/seg/w1/a", "log/seg/w1/b", "log/seg/w2/a", "log/seg/w2/b", "log/seg/w2/c"} {
		if _, err := b.Put(ctx, k, []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	list := func(ctx context.Context) []string {
		var out []string
		for a, err := range b.List(ctx, "log/seg/") {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, a.Key)
		}
		return out
	}
	if got := list(ctx); !slices.Equal(got, []string{"log/seg/w2/a"}) {
		t.Fatalf("a lagging listing: %v", got)
	}
	if got := list(blobtest.WithTakeover(ctx)); len(got) != 5 {
		t.Fatalf("a takeover's listing lagged: %v", got)
	}
	l.SetLying(false)
	if got := list(ctx); len(got) != 5 {
		t.Fatalf("a listing lagged with lying off: %v", got)
	}
	if l.Count(blobtest.ActListLag) != 4 {
		t.Fatalf("counts: %s", l.Summary())
	}
}

// TestVersionReaderKept: the Liar, the Stale and BucketDriver keep the
// VersionReader capability of what they wrap (and Appender beside it).
func TestVersionReaderKept(t *testing.T) {
	for name, d := range map[string]driver.Driver{"mem": memDriver(), "local": localDriver(t)} {
		_, app := d.(driver.Appender)
		for what, w := range map[string]driver.Driver{
			"Liar":         blobtest.NewLiar(d, blobtest.Schedule{}).Driver(),
			"stale Liar":   blobtest.NewLiar(d, blobtest.Schedule{Broken: blobtest.BrokenStale}).Driver(),
			"Stale":        blobtest.NewStale(d, blobtest.StaleSchedule{}).Driver(),
			"BucketDriver": blobtest.BucketDriver(blob.NewBucket(d)),
		} {
			if _, ok := w.(driver.VersionReader); !ok {
				t.Errorf("%s over %s lost the VersionReader capability", what, name)
			}
			if _, ok := w.(driver.Appender); ok != app {
				t.Errorf("%s over %s: Appender %v, want %v", what, name, ok, app)
			}
		}
	}
}

// TestStaleReadVersion: a version read is one response: within a torn
// window too it answers an old body with that version's own ETag.
func TestStaleReadVersion(t *testing.T) {
	st := blobtest.NewStale(memDriver(), blobtest.StaleSchedule{Seed: 1, Start: 1, Calls: 1 << 20, Torn: 1})
	b := st.Bucket()
	etags, bodies := putVersions(t, b, "log/meta", 3)
	data, a, err := b.ReadVersion(context.Background(), "log/meta")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(etags, a.ETag)
	if i < 0 || i == 2 || bodies[i] != string(data) {
		t.Fatalf("ReadVersion answered %q with ETag %s: want an older version with its own ETag (versions %q)", data, a.ETag, etags)
	}
	if st.Counts()["meta/"+string(blobtest.ActStale)] != 1 {
		t.Fatalf("counts %v", st.Counts())
	}
}
