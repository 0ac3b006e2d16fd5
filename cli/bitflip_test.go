package cli

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/gc"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/reader"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"
)

// The bit-flip acceptance of issue 12: every single-bit flip in a sealed
// segment, in a writer state or the meta object, or in a name under the log's
// prefix, is an error finding of Verify (reader.Verify, and `redokit verify`
// for what reader.Verify does not read: the meta object and the writer
// states against each other).
//
//	REDOKIT_BITFLIPS=N      flips to try (default 150; scripts/test.sh sets the CI size)
//	REDOKIT_BITFLIP_SEED=S  the seed of the log and of the flips

const flipLog = "flips"

// flipClass is what a flip damages.
type flipClass int

const (
	flipSegment flipClass = iota // a byte of a sealed segment
	flipMeta                     // a byte of a writer state or the meta object
	flipName                     // a byte of an object's key below "<log>/"
)

func (c flipClass) String() string {
	return [...]string{"segment byte", "state/meta byte", "name"}[c]
}

// flip is one single-bit damage.
type flip struct {
	class  flipClass
	key    string // the object
	byte   int    // offset in the object (or in its key)
	bit    uint
	newKey string // flipName: the key after the flip
}

func (f flip) String() string {
	if f.class == flipName {
		return fmt.Sprintf("%s: %q byte %d bit %d → %q", f.class, f.key, f.byte, f.bit, f.newKey)
	}
	return fmt.Sprintf("%s: %q byte %d bit %d", f.class, f.key, f.byte, f.bit)
}

func flipCount(t *testing.T) int { return testenv.Count(t, "REDOKIT_BITFLIPS", 150) }

func flipSeed(t *testing.T) uint64 { return testenv.Seed(t, "REDOKIT_BITFLIP_SEED", 12) }

// nameKind sorts a name flip by what has to catch it, for the summary.
func nameKind(f flip) string {
	was, err1 := segment.ParseName(f.key)
	now, err2 := segment.ParseName(f.newKey)
	switch {
	case !utf8.ValidString(f.newKey) || strings.ContainsFunc(f.newKey, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "not UTF-8 or a control character (the listing must show it)"
	case strings.Count(f.newKey, "/") != strings.Count(f.key, "/"):
		return "a '/' more or less (another depth)"
	case err1 == nil && err2 == nil && now.Epoch < was.Epoch:
		return "a valid name of an earlier, fenced epoch (only the chain sees the seq missing)"
	case err1 == nil && err2 == nil:
		return "a valid segment name (the chain, header and footer must disagree)"
	case err1 == nil && !strings.HasPrefix(f.newKey, layout.Segments(flipLog)):
		return "a segment moved out of seg/ (the chain sees it missing)"
	case err1 == nil:
		return "a segment name that does not parse"
	default:
		return "a state or meta name"
	}
}

// buildFlipLog writes a small log on local disk: two writers with several
// sealed segments each (the first ones collected below the checkpoint), the
// meta object and the writer states.
func buildFlipLog(t *testing.T, dir string, seed uint64) *blob.Bucket {
	t.Helper()
	ctx := context.Background()
	b, err := local.New(dir, &local.Options{CreateDir: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	coord, err := meta.OpenCoordinator(ctx, b, flipLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 0xb17f))
	ids := []string{"w1", "w2"}
	ws := map[string]*writer.Writer{}
	for i, id := range ids {
		flipMust(t, coord.AddWriter(ctx, id))
		w, err := writer.Open(ctx, b, &writer.Options{LogID: flipLog, WriterID: id,
			FlushInterval: time.Hour, MaxSegmentBytes: 4 << 10, BlockSize: 1 << 10})
		if err != nil {
			t.Fatal(err)
		}
		span := writer.SpanID(i + 1)
		flipMust(t, coord.AddSpan(ctx, span, 0))
		flipMust(t, w.AddSpan(span, 0))
		ws[id] = w
	}
	var id int64
	for ts := uint64(1); ts <= 120; ts++ {
		for i, wid := range ids {
			span := writer.SpanID(i + 1)
			w := ws[wid]
			for range r.IntN(3) {
				id++
				flipMust(t, w.Write(ctx, span, flipRow(r, span, ts, id)))
			}
			flipMust(t, w.AdvanceResolved(span, ts))
			if ts%10 == 0 {
				if _, err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for _, w := range ws {
		flipMust(t, w.Close(ctx))
	}
	m, err := coord.Tick(ctx)
	flipMust(t, err)
	// Just above the first segment of each writer, so that GC collects
	// one or two of them and the chains start above a collected link.
	firsts := map[string]uint64{}
	for a, err := range b.List(ctx, layout.Segments(flipLog)) {
		flipMust(t, err)
		n, err := segment.ParseName(a.Key)
		flipMust(t, err)
		if cur, ok := firsts[n.WriterID]; !n.Active && (!ok || n.MaxTs < cur) {
			firsts[n.WriterID] = n.MaxTs
		}
	}
	cp := max(firsts["w1"], firsts["w2"]) + 1
	if m.ResolvedTs < cp || len(firsts) != 2 {
		t.Fatalf("resolved ts %d after the build, first segments end at %v", m.ResolvedTs, firsts)
	}
	flipMust(t, coord.SetCheckpoint(ctx, cp))
	res, err := gc.Collect(ctx, b, flipLog, &gc.Options{Below: cp})
	flipMust(t, err)
	if res.Deleted == 0 {
		t.Fatalf("GC at %d collected nothing: the log does not exercise collected predecessors", cp)
	}
	return b
}

func flipRow(r *rand.Rand, span writer.SpanID, ts uint64, id int64) codec.Event {
	text := make([]byte, 40+r.IntN(120))
	for i := range text {
		text[i] = "abcdefghij klmnop"[r.IntN(17)]
	}
	return codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
		StartTs: ts - 1, CommitTs: ts,
		Table: codec.TableName{Schema: "db", Name: fmt.Sprintf("t%d", span), PhysicalID: int64(span)},
		Columns: []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey, Value: codec.IntValue(id)},
			{Name: "v", Type: codec.TypeVarchar, Value: codec.StringValue(string(text))},
		},
	}}
}

func flipMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// flipObjects lists the log's objects by class: sealed segments, and the
// writer states and meta object.
func flipObjects(t *testing.T, dir string) (segs, metas []string) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(dir, flipLog), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		key, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		key = filepath.ToSlash(key)
		switch {
		case strings.HasSuffix(key, segment.SealedExt):
			segs = append(segs, key)
		case strings.HasPrefix(key, layout.Writers(flipLog)) || key == layout.Meta(flipLog):
			metas = append(metas, key)
		default:
			t.Fatalf("unexpected object %q in the log", key)
		}
		return nil
	})
	flipMust(t, err)
	slices.Sort(segs)
	slices.Sort(metas)
	if len(segs) < 6 || len(metas) != 3 {
		t.Fatalf("the log holds %d sealed segments and %d state/meta objects: %q %q", len(segs), len(metas), segs, metas)
	}
	return segs, metas
}

// apply makes the damage of f on disk and returns how to undo it; ok false
// means the flip cannot exist on this file system (a NUL byte in a name, a
// name that is taken, a path through a file).
func (f flip) apply(t *testing.T, dir string) (undo func(), ok bool) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(f.key))
	if f.class != flipName {
		data, err := os.ReadFile(path)
		flipMust(t, err)
		orig := slices.Clone(data)
		data[f.byte] ^= 1 << f.bit
		flipMust(t, os.WriteFile(path, data, 0o644))
		return func() { flipMust(t, os.WriteFile(path, orig, 0o644)) }, true
	}
	if strings.ContainsRune(f.newKey, 0) {
		return nil, false
	}
	to := filepath.Join(dir, filepath.FromSlash(f.newKey))
	if _, err := os.Lstat(to); err == nil {
		return nil, false
	}
	// Directories the new name needs; removed again on undo.
	var made []string
	for d := filepath.Dir(to); d != dir; d = filepath.Dir(d) {
		if fi, err := os.Lstat(d); err == nil {
			if !fi.IsDir() {
				return nil, false
			}
			break
		}
		made = append(made, d)
	}
	for _, d := range slices.Backward(made) {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
	}
	if err := os.Rename(path, to); err != nil {
		t.Fatalf("%v: %v", f, err)
	}
	return func() {
		flipMust(t, os.Rename(to, path))
		for _, d := range made {
			flipMust(t, os.Remove(d))
		}
	}, true
}

// pickFlip chooses the flip of one trial: the classes in turn, an object, a byte
// and a bit at random.
func pickFlip(r *rand.Rand, i int, dir string, segs, metas []string) flip {
	f := flip{class: flipClass(i % 3), bit: uint(r.IntN(8))}
	switch f.class {
	case flipSegment:
		f.key = segs[r.IntN(len(segs))]
	case flipMeta:
		f.key = metas[r.IntN(len(metas))]
	case flipName:
		all := append(slices.Clone(segs), metas...)
		f.key = all[r.IntN(len(all))]
		// Below the log ID: a flip in the log ID moves the object to
		// another log, which this log's Verify cannot be asked about.
		from := len(flipLog) + 1
		f.byte = from + r.IntN(len(f.key)-from)
		k := []byte(f.key)
		k[f.byte] ^= 1 << f.bit
		f.newKey = string(k)
		return f
	}
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(f.key)))
	if err != nil {
		panic(err)
	}
	size := int(fi.Size())
	f.byte = r.IntN(size)
	if f.class == flipSegment && r.IntN(2) == 0 && size > 1024 {
		// Half of them near the ends, where the header (and its link), the
		// footer index and the trailer are: a few hundred bytes that
		// uniform picks would seldom reach.
		if f.byte = r.IntN(512); f.byte >= 256 {
			f.byte = size - 512 + f.byte
		}
	}
	return f
}

// flipFindings runs reader.Verify and, when it finds no error, `redokit verify`
// (which adds the meta object and the writer states). It says which found
// the damage, or "" when neither did.
func flipFindings(t *testing.T, ctx context.Context, b *blob.Bucket, dir string) (string, error) {
	rep, err := reader.Verify(ctx, b, flipLog, nil)
	switch {
	case err != nil:
		return "reader.Verify failed: " + err.Error(), nil
	case !rep.OK():
		return "reader.Verify: " + rep.Errors()[0].String(), nil
	}
	res := cli(t, "verify", "--storage", dir, "--log", flipLog)
	switch res.code {
	case 0:
		return "", nil
	case 1:
		return "redokit verify exit 1", nil
	default:
		return "", fmt.Errorf("redokit verify exit %d:\n%s", res.code, res)
	}
}

func TestEveryBitFlipIsFound(t *testing.T) {
	n := flipCount(t)
	seed := flipSeed(t)
	dir := t.TempDir()
	ctx := context.Background()
	b := buildFlipLog(t, dir, seed)
	segs, metas := flipObjects(t, dir)
	if why, err := flipFindings(t, ctx, b, dir); err != nil || why != "" {
		t.Fatalf("the undamaged log does not verify clean: %s %v", why, err)
	}
	r := rand.New(rand.NewPCG(seed, 0xf11b))
	start := time.Now()
	var undetected []string
	tried := map[flipClass]int{}
	var unrepresentable, byCLI, cliChecks int
	kinds := map[string]int{}
	for i := 0; i < n; {
		f := pickFlip(r, i, dir, segs, metas)
		undo, ok := f.apply(t, dir)
		if !ok {
			unrepresentable++
			continue // another flip in its place
		}
		i++
		tried[f.class]++
		if f.class == flipName {
			kinds[nameKind(f)]++
		}
		why, err := flipFindings(t, ctx, b, dir)
		if err != nil {
			undo()
			t.Fatalf("%v: %v", f, err)
		}
		if strings.HasPrefix(why, "redokit verify") {
			byCLI++
		}
		// Now and then the CLI on a flip reader.Verify found, for its exit
		// code: an error finding must fail it too.
		if why != "" && !strings.HasPrefix(why, "redokit verify") && i%20 == 0 {
			cliChecks++
			if res := cli(t, "verify", "--storage", dir, "--log", flipLog); res.code != 1 {
				undo()
				t.Fatalf("%v: reader.Verify found it (%s), redokit verify exits %d:\n%s", f, why, res.code, res)
			}
		}
		undo()
		if why == "" {
			undetected = append(undetected, f.String())
		} else if testing.Verbose() && i%50 == 0 {
			t.Logf("%v: %s", f, why)
		}
	}
	// Every flip was undone: the log is whole again.
	if why, err := flipFindings(t, ctx, b, dir); err != nil || why != "" {
		t.Fatalf("the log does not verify clean after the flips were undone: %s %v", why, err)
	}
	total := tried[flipSegment] + tried[flipMeta] + tried[flipName]
	t.Logf("%d flips in %v (seed %d): %d segment bytes, %d state/meta bytes, %d names; %d found only by redokit verify, %d exit codes checked; %d names not representable on disk redrawn",
		total, time.Since(start).Round(time.Millisecond), seed, tried[flipSegment], tried[flipMeta], tried[flipName], byCLI, cliChecks, unrepresentable)
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		t.Logf("  names: %4d %s", kinds[k], k)
	}
	if len(undetected) > 0 {
		t.Errorf("%d of %d flips went undetected:\n  %s", len(undetected), total, strings.Join(undetected[:min(len(undetected), 100)], "\n  "))
	}
}
