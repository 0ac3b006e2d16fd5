package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/blob"
)

// A bucketCheck is one property of the blob contract that a redo log relies
// on, tried against a live bucket. It runs on a view of the bucket under a
// scratch prefix and returns a short detail on success.
type bucketCheck struct {
	name string
	why  string // what the log needs it for, shown with a failure
	run  func(ctx context.Context, b *blob.Bucket, o *checkOptions) (string, error)
}

type checkOptions struct {
	largeSize int // bytes of the largest round-trip object
	batchKeys int // keys of the batch delete
	timeout   time.Duration
}

// checkResult is one row of check's table.
type checkResult struct {
	Check    string  `json:"check"`
	Result   string  `json:"result"` // pass, fail, skip
	Seconds  float64 `json:"seconds"`
	Detail   string  `json:"detail,omitempty"`
	Required string  `json:"required_for,omitempty"`
}

var bucketChecks = []bucketCheck{
	{"round trip", "segments must read back byte for byte", checkRoundTrip},
	{"ranged read", "readers fetch a segment's footer and blocks by range", checkRangedRead},
	{"not found", "readers and GC must tell a missing object from a failure", checkNotFound},
	{"listing order", "segment selection and GC rely on lexicographic listing across pages", checkListing},
	{"conditional create race", "writer leases and segment names rely on exactly one create-if-absent winner", checkCreateRace},
	{"compare-and-swap", "progress, fences and the meta object are updated by compare-and-swap", checkCAS},
	{"batch delete", "GC deletes segments in batches of up to 1,000", checkBatchDelete},
	{"read-after-delete", "GC and rm must see a deleted object gone", checkReadAfterDelete},
	{"append", "optional: lets a local writer append and fsync one active segment", checkAppend},
}

// errSkip marks a check that does not apply to this backend.
var errSkip = errors.New("skip")

func (a *app) checkCmd() *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that a bucket is fit to hold a redo log",
		Long: `check runs a quick subset of the conformance suite against a live bucket:
byte-exact round trips (up to --large-size), ranged reads, not-found errors,
lexicographic listing across pages, a race of conditional creates with exactly
one winner, compare-and-swap by ETag, a batch delete, and read-after-delete;
and whether the backend can append (optional).

Everything happens under a fresh scratch prefix (redokit-check-…/) that is
removed afterwards, also when a check fails; nothing outside it is read or
written. The exit code is 1 if any check fails.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.batchKeys < 1 || o.largeSize < 1 {
				return usageErrorf("--batch-keys and --large-size must be positive")
			}
			b, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			results, cleanupErr, err := runChecks(ctx, b, &o, a.bar(int64(len(bucketChecks)), "checking", false))
			if err != nil {
				return err
			}
			failed := 0
			for _, r := range results {
				if r.Result == "fail" {
					failed++
				}
			}
			if a.jsonOut {
				if err := a.printJSON(struct {
					Storage string        `json:"storage"`
					OK      bool          `json:"ok"`
					Checks  []checkResult `json:"checks"`
				}{a.storageShown(), failed == 0, results}); err != nil {
					return err
				}
			} else {
				tw := a.table()
				fmt.Fprintln(tw, "CHECK\tRESULT\tTIME\tDETAIL")
				for _, r := range results {
					detail := r.Detail
					if r.Result == "fail" && r.Required != "" {
						detail += " (needed because " + r.Required + ")"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Check, strings.ToUpper(r.Result), (time.Duration(r.Seconds * float64(time.Second))).Round(time.Millisecond), detail)
				}
				tw.Flush()
				if failed == 0 {
					fmt.Fprintf(a.stdout, "%s is fit to hold a redo log\n", a.storageShown())
				} else {
					fmt.Fprintf(a.stdout, "%s is NOT fit to hold a redo log: %d checks failed\n", a.storageShown(), failed)
				}
			}
			if failed > 0 {
				return errSilent
			}
			if cleanupErr != nil {
				return cleanupErr
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.largeSize, "large-size", 8<<20, "bytes of the largest round-trip object (above the multipart threshold of the cloud drivers)")
	f.IntVar(&o.batchKeys, "batch-keys", 1001, "keys created and deleted in one batch delete (above 1,000, S3's batch limit)")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "deadline of each check")
	return cmd
}

// runChecks runs every check under a new scratch prefix of b and removes
// the prefix afterwards whatever happened. The cleanup is reported as a row
// of its own, and its error returned separately.
func runChecks(ctx context.Context, b *blob.Bucket, o *checkOptions, bar interface {
	Add(int) error
	Finish() error
}) (results []checkResult, cleanupErr, err error) {
	prefix, err := scratchPrefix(ctx, b, "check")
	if err != nil {
		return nil, nil, err
	}
	sb, err := b.Prefixed(prefix)
	if err != nil {
		return nil, nil, err
	}
	defer func() {
		// Clean up with a context of its own: an interrupt or a check's
		// deadline must not leave the scratch objects behind.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		start := time.Now()
		n, cerr := removeAll(cctx, sb)
		r := checkResult{Check: "cleanup", Result: "pass", Seconds: time.Since(start).Seconds(),
			Detail: fmt.Sprintf("removed %d objects under %s", n, prefix)}
		if cerr != nil {
			r.Result, r.Detail = "fail", fmt.Sprintf("objects under %s may be left: %v", prefix, cerr)
			cleanupErr = fmt.Errorf("clean up the scratch prefix %s: %w", prefix, cerr)
		}
		results = append(results, r)
	}()
	for _, c := range bucketChecks {
		if ctx.Err() != nil {
			break
		}
		results = append(results, runCheck(ctx, sb, c, o))
		_ = bar.Add(1)
	}
	_ = bar.Finish()
	return results, nil, ctx.Err()
}

func runCheck(ctx context.Context, b *blob.Bucket, c bucketCheck, o *checkOptions) (r checkResult) {
	r = checkResult{Check: c.name}
	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	defer func() {
		// A driver that panics fails its check; it must not take the
		// cleanup down with it.
		if p := recover(); p != nil {
			r.Result, r.Detail, r.Required = "fail", fmt.Sprintf("panic: %v", p), c.why
		}
		r.Seconds = time.Since(start).Seconds()
	}()
	detail, err := c.run(cctx, b, o)
	switch {
	case errors.Is(err, errSkip):
		r.Result, r.Detail = "skip", detail
	case err != nil:
		r.Result, r.Detail, r.Required = "fail", err.Error(), c.why
	default:
		r.Result, r.Detail = "pass", detail
	}
	return r
}

// scratchPrefix picks a prefix no object of b starts with.
func scratchPrefix(ctx context.Context, b *blob.Bucket, tool string) (string, error) {
	for range 5 {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		p := fmt.Sprintf("redokit-%s-%s-%s/", tool, time.Now().UTC().Format("20060102T150405"), hex.EncodeToString(rnd[:]))
		page, err := b.ListPage(ctx, p, blob.ListOptions{PageSize: 1})
		if err != nil {
			return "", fmt.Errorf("list the bucket: %w", err)
		}
		if len(page.Objects) == 0 {
			return p, nil
		}
	}
	return "", errors.New("could not find an unused scratch prefix")
}

// openScratch returns a view of b under a fresh scratch prefix, the prefix and the
// cleanup to defer: it removes everything under the prefix (even when the
// command's context has ended) and joins a failure to *err.
func openScratch(ctx context.Context, b *blob.Bucket, tool string) (sb *blob.Bucket, prefix string, cleanup func(err *error), err error) {
	if prefix, err = scratchPrefix(ctx, b, tool); err != nil {
		return nil, "", nil, err
	}
	if sb, err = b.Prefixed(prefix); err != nil {
		return nil, "", nil, err
	}
	cleanup = func(err *error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if _, cerr := removeAll(cctx, sb); cerr != nil {
			*err = errors.Join(*err, fmt.Errorf("clean up the scratch prefix %s: %w", prefix, cerr))
		}
	}
	return sb, prefix, cleanup, nil
}

// removeAll deletes every object of b (a scratch view) and checks none is
// left.
func removeAll(ctx context.Context, b *blob.Bucket) (int, error) {
	var keys []string
	for attrs, err := range b.List(ctx, "") {
		if err != nil {
			return 0, err
		}
		keys = append(keys, attrs.Key)
	}
	if len(keys) == 0 {
		return 0, nil
	}
	if err := b.Delete(ctx, keys...); err != nil {
		return 0, err
	}
	page, err := b.ListPage(ctx, "", blob.ListOptions{PageSize: 1})
	if err != nil {
		return len(keys), err
	}
	if len(page.Objects) > 0 {
		return len(keys), fmt.Errorf("%s is still listed after its delete", page.Objects[0].Key)
	}
	return len(keys), nil
}

func randomBytes(n int, seed uint64) []byte {
	r := mrand.New(mrand.NewPCG(seed, seed+1))
	out := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			out[i+j] = byte(v >> (8 * j))
		}
	}
	return out
}

func checkRoundTrip(ctx context.Context, b *blob.Bucket, o *checkOptions) (string, error) {
	sizes := []int{0, 1, 64 << 10, o.largeSize}
	for i, n := range sizes {
		key := fmt.Sprintf("rt/%02d-%d", i, n)
		data := randomBytes(n, uint64(n))
		attrs, err := b.Put(ctx, key, data, nil)
		if err != nil {
			return "", fmt.Errorf("put %d bytes: %w", n, err)
		}
		if attrs.Size != int64(n) {
			return "", fmt.Errorf("put of %d bytes reported size %d", n, attrs.Size)
		}
		got, err := b.ReadAll(ctx, key)
		if err != nil {
			return "", fmt.Errorf("read %d bytes back: %w", n, err)
		}
		if !bytes.Equal(got, data) {
			return "", fmt.Errorf("%d bytes written, %d read back, content differs", n, len(got))
		}
		st, err := b.Stat(ctx, key)
		if err != nil {
			return "", fmt.Errorf("stat: %w", err)
		}
		if st.Size != int64(n) {
			return "", fmt.Errorf("stat of a %d-byte object says %d", n, st.Size)
		}
	}
	return fmt.Sprintf("%d objects of 0 B to %s byte-exact", len(sizes), humanBytes(int64(o.largeSize))), nil
}

func checkRangedRead(ctx context.Context, b *blob.Bucket, _ *checkOptions) (string, error) {
	const n = 1 << 20
	data := randomBytes(n, 42)
	if _, err := b.Put(ctx, "range/obj", data, nil); err != nil {
		return "", err
	}
	cases := []struct {
		off, length int64
		want        []byte
	}{
		{1000, 5000, data[1000:6000]},
		{0, 1, data[:1]},
		{n - 10, 100, data[n-10:]},
		{n, 10, nil},
		{12345, -1, data[12345:]},
	}
	for _, c := range cases {
		got, err := b.ReadRange(ctx, "range/obj", c.off, c.length)
		if err != nil {
			return "", fmt.Errorf("read %d bytes at %d: %w", c.length, c.off, err)
		}
		if !bytes.Equal(got, c.want) {
			return "", fmt.Errorf("read %d bytes at %d: got %d bytes, want %d (or different content)", c.length, c.off, len(got), len(c.want))
		}
	}
	return fmt.Sprintf("%d ranges of a 1 MiB object, including past its end", len(cases)), nil
}

func checkNotFound(ctx context.Context, b *blob.Bucket, _ *checkOptions) (string, error) {
	const key = "missing/never-written"
	if _, err := b.ReadAll(ctx, key); !blob.IsNotExist(err) {
		return "", fmt.Errorf("read of a missing key: want a not-exist error, got %v", err)
	} else if !strings.Contains(err.Error(), key) {
		return "", fmt.Errorf("the not-exist error does not name the key: %v", err)
	}
	if _, err := b.Stat(ctx, key); !blob.IsNotExist(err) {
		return "", fmt.Errorf("stat of a missing key: want a not-exist error, got %v", err)
	}
	return "read and stat of a missing key say not-exist, naming it", nil
}

func checkListing(ctx context.Context, b *blob.Bucket, _ *checkOptions) (string, error) {
	// Names that sort differently by byte than by naive number order, put
	// in a shuffled order, listed in pages smaller than the set.
	var keys []string
	for i := range 23 {
		keys = append(keys, fmt.Sprintf("list/k-%d", i*7))
	}
	keys = append(keys, "list/k-", "list/k-~", "list/K-upper", "list/k-0-a")
	shuffled := slices.Clone(keys)
	mrand.New(mrand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if err := putAll(ctx, b, shuffled, 8); err != nil {
		return "", err
	}
	if _, err := b.Put(ctx, "listx/outside", []byte("x"), nil); err != nil {
		return "", err
	}
	slices.Sort(keys)
	got, pages, err := listPaged(ctx, b, "list/", 5)
	if err != nil {
		return "", err
	}
	if !slices.Equal(got, keys) {
		return "", fmt.Errorf("listed %d keys in pages of 5, want the %d written in byte order: got %q", len(got), len(keys), got)
	}
	// After a delete in the middle, listing stays complete and ordered.
	if err := b.Delete(ctx, keys[3], keys[10]); err != nil {
		return "", err
	}
	want := slices.Delete(slices.Clone(keys), 10, 11)
	want = slices.Delete(want, 3, 4)
	got, _, err = listPaged(ctx, b, "list/", 4)
	if err != nil {
		return "", err
	}
	if !slices.Equal(got, want) {
		return "", fmt.Errorf("after deleting 2 keys, listed %q, want %q", got, want)
	}
	return fmt.Sprintf("%d keys in %d pages, byte order, prefix respected, consistent after deletes", len(keys), pages), nil
}

func listPaged(ctx context.Context, b *blob.Bucket, prefix string, size int) ([]string, int, error) {
	var out []string
	opts := blob.ListOptions{PageSize: size}
	pages := 0
	for {
		page, err := b.ListPage(ctx, prefix, opts)
		if err != nil {
			return nil, pages, err
		}
		pages++
		if len(page.Objects) > size {
			return nil, pages, fmt.Errorf("a page of size %d returned %d objects", size, len(page.Objects))
		}
		for _, o := range page.Objects {
			out = append(out, o.Key)
		}
		if page.NextToken == "" {
			return out, pages, nil
		}
		if pages > 1000 {
			return nil, pages, errors.New("listing does not end: the continuation token never runs out")
		}
		opts.Token = page.NextToken
	}
}

func putAll(ctx context.Context, b *blob.Bucket, keys []string, workers int) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	ch := make(chan string)
	for range workers {
		wg.Go(func() {
			for k := range ch {
				if _, err := b.Put(ctx, k, []byte(k), nil); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for _, k := range keys {
		ch <- k
	}
	close(ch)
	wg.Wait()
	return first
}

func checkCreateRace(ctx context.Context, b *blob.Bucket, _ *checkOptions) (string, error) {
	const racers = 8
	const key = "race/lease"
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		others  []error
	)
	startGun := make(chan struct{})
	for i := range racers {
		wg.Go(func() {
			<-startGun
			_, err := b.Put(ctx, key, fmt.Appendf(nil, "racer %d", i), &blob.PutOptions{IfNotExist: true})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, i)
			case !blob.IsPreconditionFailed(err):
				others = append(others, err)
			}
		})
	}
	close(startGun)
	wg.Wait()
	if len(others) > 0 {
		return "", fmt.Errorf("a losing create failed with something other than precondition-failed: %v", others[0])
	}
	if len(winners) != 1 {
		return "", fmt.Errorf("%d of %d concurrent create-if-absent writes succeeded, want exactly 1 (the backend ignores if-none-match?)", len(winners), racers)
	}
	got, err := b.ReadAll(ctx, key)
	if err != nil {
		return "", err
	}
	if want := fmt.Sprintf("racer %d", winners[0]); string(got) != want {
		return "", fmt.Errorf("the object holds %q, but the winner wrote %q", got, want)
	}
	if _, err := b.Put(ctx, key, []byte("late"), &blob.PutOptions{IfNotExist: true}); !blob.IsPreconditionFailed(err) {
		return "", fmt.Errorf("create-if-absent of an existing key: want precondition-failed, got %v", err)
	}
	return fmt.Sprintf("1 winner of %d racers; a late create fails", racers), nil
}

func checkCAS(ctx context.Context, b *blob.Bucket, _ *checkOptions) (string, error) {
	const key = "cas/state"
	a1, err := b.Put(ctx, key, []byte("v1"), nil)
	if err != nil {
		return "", err
	}
	if a1.ETag == "" {
		return "", errors.New("put returned no ETag: compare-and-swap is impossible")
	}
	a2, err := b.Put(ctx, key, []byte("v2"), &blob.PutOptions{IfMatch: a1.ETag})
	if err != nil {
		return "", fmt.Errorf("put if-match the current ETag: %w", err)
	}
	if a2.ETag == a1.ETag {
		return "", errors.New("the ETag did not change with the content")
	}
	if _, err := b.Put(ctx, key, []byte("v3"), &blob.PutOptions{IfMatch: a1.ETag}); !blob.IsPreconditionFailed(err) {
		return "", fmt.Errorf("put if-match a stale ETag: want precondition-failed, got %v", err)
	}
	if _, err := b.Put(ctx, "cas/missing", []byte("x"), &blob.PutOptions{IfMatch: a1.ETag}); !blob.IsPreconditionFailed(err) && !blob.IsNotExist(err) {
		return "", fmt.Errorf("put if-match on a missing key: want precondition-failed, got %v", err)
	}
	got, err := b.ReadAll(ctx, key)
	if err != nil {
		return "", err
	}
	if string(got) != "v2" {
		return "", fmt.Errorf("after a lost compare-and-swap the object holds %q, want \"v2\"", got)
	}
	return "if-match wins on the current ETag, loses on a stale one", nil
}

func checkBatchDelete(ctx context.Context, b *blob.Bucket, o *checkOptions) (string, error) {
	keys := make([]string, o.batchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("batch/%06d", i)
	}
	if err := putAll(ctx, b, keys, 16); err != nil {
		return "", fmt.Errorf("create %d keys: %w", len(keys), err)
	}
	before := b.Stats()
	// One call with every key and a missing one: deletes are batched by
	// the Bucket, and a missing key is not an error.
	if err := b.Delete(ctx, append(keys, "batch/missing")...); err != nil {
		return "", fmt.Errorf("delete %d keys: %w", len(keys)+1, err)
	}
	calls := b.Stats().Sub(before).Deletes
	page, err := b.ListPage(ctx, "batch/", blob.ListOptions{PageSize: 10})
	if err != nil {
		return "", err
	}
	if len(page.Objects) > 0 {
		return "", fmt.Errorf("%s is still listed after the batch delete", page.Objects[0].Key)
	}
	return fmt.Sprintf("%d keys (and a missing one) deleted in %d calls", len(keys), calls), nil
}

func checkReadAfterDelete(ctx context.Context, b *blob.Bucket, _ *checkOptions) (string, error) {
	const key = "rad/obj"
	if _, err := b.Put(ctx, key, []byte("soon gone"), nil); err != nil {
		return "", err
	}
	if _, err := b.ReadAll(ctx, key); err != nil {
		return "", err
	}
	if err := b.Delete(ctx, key); err != nil {
		return "", err
	}
	if _, err := b.ReadAll(ctx, key); !blob.IsNotExist(err) {
		return "", fmt.Errorf("read after delete: want not-exist, got %v", err)
	}
	if _, err := b.Stat(ctx, key); !blob.IsNotExist(err) {
		return "", fmt.Errorf("stat after delete: want not-exist, got %v", err)
	}
	page, err := b.ListPage(ctx, "rad/", blob.ListOptions{})
	if err != nil {
		return "", err
	}
	if len(page.Objects) > 0 {
		return "", errors.New("a deleted object is still listed")
	}
	if err := b.Delete(ctx, key); err != nil {
		return "", fmt.Errorf("deleting a missing key must succeed: %w", err)
	}
	return "gone for read, stat and list; a second delete succeeds", nil
}

func checkAppend(ctx context.Context, b *blob.Bucket, _ *checkOptions) (string, error) {
	if !b.CanAppend() {
		return "no append: writers put one object per flush (fine for object stores)", errSkip
	}
	f, err := b.OpenAppend(ctx, "append/seg.active")
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, part := range []string{"hello ", "redo ", "log"} {
		if _, err := f.Write([]byte(part)); err != nil {
			return "", err
		}
		if err := f.Sync(); err != nil {
			return "", err
		}
	}
	if _, err := f.Seal(ctx, "append/seg.sealed"); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	got, err := b.ReadAll(ctx, "append/seg.sealed")
	if err != nil {
		return "", err
	}
	if string(got) != "hello redo log" {
		return "", fmt.Errorf("sealed object holds %q", got)
	}
	if ok, _ := b.Exists(ctx, "append/seg.active"); ok {
		return "", errors.New("the active object is still there after its seal")
	}
	return "append, sync and seal by rename", nil
}
