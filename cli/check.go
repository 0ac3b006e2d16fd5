package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/redo"
)

type checkOptions struct {
	largeSize int64 // bytes of the large round trip (Harness.LargeObject)
	timeout   time.Duration
	run       string // a regular expression of the rules to run
	redo      bool   // also the redo suite (conformance/redo)
}

// checkResult is one row of check's table: one rule of the conformance
// suite under Plain or Prefixed, or the cleanup.
type checkResult struct {
	Check    string   `json:"check"`
	Result   string   `json:"result"` // pass, fail, skip
	Seconds  float64  `json:"seconds"`
	Detail   string   `json:"detail,omitempty"`
	Required string   `json:"required_for,omitempty"`
	Failed   []string `json:"failed,omitempty"` // the failed subtests, with their messages
}

// ruleWhy says what a redo log needs each rule of the suite for, shown with
// a failure.
var ruleWhy = map[string]string{
	"RoundTrip":         "segments must read back byte for byte",
	"Concurrent":        "writers, readers and GC work at once",
	"Atomic":            "a reader must never see a half-written segment or progress object",
	"RangedRead":        "readers fetch a segment's footer and blocks by range",
	"NotExist":          "readers and GC must tell a missing object from a failure",
	"Keys":              "log, writer and segment names must be stored under their own keys",
	"ListOrder":         "segment selection and GC rely on byte-ordered listings",
	"ListPrefix":        "a log's segments are found by listing its prefix",
	"ListLiteralPrefix": "a log's segments are found by listing its prefix",
	"ListPages":         "segment selection and GC rely on complete listings across pages",
	"ListThousands":     "a log's segment listing runs past 1,000 keys: a listing cut at a full page loses every segment after it",
	"ListStartAfter":    "readers list from where they stopped",
	"ListWhilePaging":   "a listing must not miss a segment put or deleted while it runs",
	"ListWhileChanging": "a listing must not miss a segment put, deleted or sealed while it runs",
	"ListAfterWrite":    "a reader and GC take a segment missing from a listing to be absent: a listing that lags loses acknowledged events without an error",
	"Delete":            "GC re-runs after crashes: deleting what is gone must succeed",
	"BatchDelete":       "GC deletes segments in batches of up to 1,000",
	"ConditionalCreate": "writer leases and segment names rely on exactly one create-if-absent winner",
	"CompareAndSwap":    "progress, fences and the meta object are updated by compare-and-swap",
	"ReadAfterWrite":    "the meta objects are read as a Stat's ETag paired with the body read after it, then swapped IfMatch that ETag: a stale read moves a checkpoint backwards",
	"BeforeCommit":      "an object staged behind a hook must never be visible before the hook succeeds (the blob contract's Stager promise)",
	"ModTime":           "gc --grace keeps segments modified within the grace by the ModTime a listing shows",
	"Context":           "a stuck call must end when its deadline does",
	"Closed":            "a closed bucket must refuse calls",
	"Append":            "a local writer appends and fsyncs one active segment",
	"Isolation":         "a log under a prefix must not see or touch what is beside it",
}

func (a *app) checkCmd() *cobra.Command {
	var o checkOptions
	var batchKeys int
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check that a bucket is fit to hold a redo log",
		Long: `check runs the blob conformance suite (package conformance, the one a
backend's own tests run) against a live bucket: every rule, once on the bucket
("Plain") and once under a key prefix ("Prefixed"), each on a fresh
sub-prefix. It prints one row per rule with its result and time, and for a
failure the failed subtests, their messages and what a redo log needs the rule
for. --run selects rules by a regular expression of their names (for a quick
look: --run 'RoundTrip|ConditionalCreate|CompareAndSwap|ListOrder|BatchDelete');
rules passing under --run are no verdict on the bucket, and check says so.
With --redo it then runs the redo suite (package conformance/redo) the same
way: a real redo log written, read, restarted, fenced, checkpointed and
collected, and its fault tiers (a lying store, and network faults injected
in the driver), as rows named redo/….

The store must be read-after-write consistent, in listings and in reads
(the rules ListAfterWrite and ReadAfterWrite): there is no setting for a
store whose listings lag, because such a store cannot hold a redo log.

Everything happens under a fresh scratch prefix (redokit-check-…/) that is
removed afterwards, also when a rule fails; nothing outside it is read or
written. A driver call that ignores its deadline (--timeout) by 30 seconds
fails its rule, saying so, and is left behind: check goes on with the next
rule, and removes the scratch prefix at the end as usual. The exit code is 1
if any rule fails.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{annStorage: "1"},
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if o.largeSize < 1 || o.timeout <= 0 {
				return usageErrorf("--large-size and --timeout must be positive")
			}
			sel, err := regexp.Compile(o.run)
			if err != nil {
				return usageErrorf("--run %q: %v", o.run, err)
			}
			b, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer b.Close()
			results, cleanupErr, err := runChecks(ctx, b, &o, sel, a.bar(-1, "checking", false))
			if err != nil {
				return err
			}
			return a.printChecks(results, cleanupErr, o.run)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.largeSize, "large-size", 8<<20, "bytes of the large round trip (above the multipart threshold of the cloud drivers; the suite's default is 64 MiB)")
	f.DurationVar(&o.timeout, "timeout", conformance.DefaultTimeout, "deadline of each rule")
	f.StringVar(&o.run, "run", "", "run only the rules whose names match this regular expression")
	f.BoolVar(&o.redo, "redo", false, "also run the redo suite (package conformance/redo): a real redo log, then the lying-store and network fault tiers, as rows redo/…")
	f.IntVar(&batchKeys, "batch-keys", 0, "ignored")
	_ = f.MarkDeprecated("batch-keys", "the suite's BatchDelete deletes 2,500 keys (3 driver calls)")
	return cmd
}

// printChecks prints the results and returns the command's error.
func (a *app) printChecks(results []checkResult, cleanupErr error, run string) error {
	failed := 0
	for _, r := range results {
		if r.Result == "fail" {
			failed++
		}
	}
	if a.jsonOut {
		if err := a.printJSON(struct {
			Storage string `json:"storage"`
			OK      bool   `json:"ok"`
			// Run is --run: ok then covers the selected rules only.
			Run    string        `json:"run,omitempty"`
			Checks []checkResult `json:"checks"`
		}{a.storageShown(), failed == 0, run, results}); err != nil {
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
		for _, r := range results {
			for _, m := range r.Failed {
				fmt.Fprintf(a.stdout, "--- FAIL: %s\n", m)
			}
		}
		switch {
		case failed == 0 && run != "":
			// Some rules passing says nothing of the others: no verdict on
			// the bucket.
			fmt.Fprintf(a.stdout, "the rules selected by --run %q pass on %s; run check without --run for a verdict on the bucket\n", run, a.storageShown())
		case failed == 0:
			fmt.Fprintf(a.stdout, "%s is fit to hold a redo log\n", a.storageShown())
		default:
			fmt.Fprintf(a.stdout, "%s is NOT fit to hold a redo log: %d checks failed\n", a.storageShown(), failed)
		}
	}
	if failed > 0 {
		return errSilent
	}
	return cleanupErr
}

// runChecks runs the conformance suite on a conformance.Recorder, each
// subtest on a fresh sub-prefix of a new scratch prefix of b, and removes the
// scratch prefix afterwards whatever happened. The cleanup is reported as a
// row of its own, and its error returned separately.
func runChecks(ctx context.Context, b *blob.Bucket, o *checkOptions, sel *regexp.Regexp, bar interface {
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
		// A context of its own: an interrupt or a rule's deadline must not
		// leave the scratch objects behind.
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

	h := checkHarness(b, prefix, o)
	rec := conformance.NewRecorder()
	rules := &ruleSet{names: map[string]bool{}}
	rec.OnEnd = func(r conformance.Result) {
		if rules.has(r.Name) {
			_ = bar.Add(1)
		}
	}
	rec.Run(func(t conformance.T) {
		conformance.RunBucketOn(selectT{T: t, sel: sel, rules: rules}, h)
		if o.redo {
			t.Run("redo", func(t conformance.T) {
				redo.RunOn(selectT{T: t, sel: sel, rules: rules}, redo.Harness{Harness: h})
			})
		}
	})
	_ = bar.Finish()
	all := rec.Results()
	for _, r := range all {
		if rules.has(r.Name) {
			results = append(results, ruleResult(r, all))
		}
	}
	if root := rec.Get(""); root != nil && root.Failed && len(results) == 0 {
		// The suite refused the harness itself.
		results = append(results, checkResult{Check: "suite", Result: "fail", Detail: strings.Join(root.Errors, "; ")})
	}
	return results, nil, ctx.Err()
}

// checkHarness is the harness check runs both suites on, each subtest on
// a fresh sub-prefix of prefix in b. It declares no ListSettle, and check has
// no flag to declare one: redokit needs a store whose listings and reads are
// read-after-write consistent, the blob suite holds a store to that
// (ListAfterWrite, ReadAfterWrite), and the redo suite refuses a harness with
// a settle time.
func checkHarness(b *blob.Bucket, prefix string, o *checkOptions) conformance.Harness {
	var mu sync.Mutex
	n := 0
	return conformance.Harness{
		// The suite closes each subtest's bucket (and Closed closes it on
		// purpose): each is a bucket of its own over a driver that calls
		// through b (its prefix, key checks and counters), which stays open.
		MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
			mu.Lock()
			n++
			sub := fmt.Sprintf("%s%04d/", prefix, n)
			mu.Unlock()
			return blob.NewBucket(keepOpen(blobtest.BucketDriver(b))).Prefixed(sub)
		},
		Append:            b.CanAppend(),
		ConditionalWrites: true,
		LargeObject:       o.largeSize,
		LargeObjectReason: "redokit check --large-size",
		Timeout:           o.timeout,
	}
}

// ruleResult is the row of the rule r, with the failures of its subtests.
func ruleResult(r conformance.Result, all []conformance.Result) checkResult {
	rule := r.Name[strings.LastIndex(r.Name, "/")+1:]
	c := checkResult{Check: r.Name, Result: "pass", Seconds: r.Elapsed.Seconds()}
	sub := 0
	for _, s := range all {
		if !strings.HasPrefix(s.Name, r.Name+"/") {
			continue
		}
		sub++
		if s.Failed && len(s.Errors) > 0 {
			c.Failed = append(c.Failed, s.Name+": "+strings.Join(s.Errors, "; "))
		}
	}
	switch {
	case r.Failed:
		c.Result, c.Required = "fail", ruleWhy[rule]
		if len(r.Errors) > 0 {
			c.Failed = append([]string{r.Name + ": " + strings.Join(r.Errors, "; ")}, c.Failed...)
		}
		c.Detail = firstLine(c.Failed)
	case r.Skipped:
		c.Result, c.Detail = "skip", strings.Join(r.Errors, "; ")
	case sub > 0:
		c.Detail = fmt.Sprintf("%d subtests", sub)
	}
	return c
}

func firstLine(msgs []string) string {
	if len(msgs) == 0 {
		return "failed"
	}
	m, _, _ := strings.Cut(msgs[0], "\n")
	if len(m) > 200 {
		m = m[:200] + "…"
	}
	if len(msgs) > 1 {
		m += fmt.Sprintf(" (and %d more)", len(msgs)-1)
	}
	return m
}

// selectT runs the rules whose names match sel, and everything else, and
// records the full names of the rules it runs. A rule is a subtest under
// Plain or Prefixed (Plain/RoundTrip), or a suite's tier of its own beside
// them (redo's Network).
type selectT struct {
	conformance.T
	sel   *regexp.Regexp
	rules *ruleSet
	depth int
	in    bool // inside a rule: its subtests all run
}

func (s selectT) Run(name string, f func(conformance.T)) bool {
	if s.in {
		return s.T.Run(name, func(t conformance.T) { f(selectT{T: t, sel: s.sel, rules: s.rules, in: true}) })
	}
	rule := s.depth == 1 || s.depth == 0 && name != "Plain" && name != "Prefixed"
	if rule && !s.sel.MatchString(name) {
		return true
	}
	return s.T.Run(name, func(t conformance.T) {
		if rule {
			s.rules.add(t.Name())
		}
		f(selectT{T: t, sel: s.sel, rules: s.rules, depth: s.depth + 1, in: rule})
	})
}

// ruleSet is the full names of the rules that ran.
type ruleSet struct {
	mu    sync.Mutex
	names map[string]bool
}

func (r *ruleSet) add(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names[name] = true
}

func (r *ruleSet) has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names[name]
}

// keepOpen wraps d for a bucket of its own whose Close leaves d open, with
// d's optional capabilities (the suite checks that Append is declared
// exactly when the driver appends, and the BeforeCommit promise of a Stager).
func keepOpen(d driver.Driver) driver.Driver {
	k := keptOpen{d}
	if ap, ok := d.(driver.Appender); ok {
		return keptOpenAppender{k, ap}
	}
	return k
}

type keptOpen struct{ driver.Driver }

func (keptOpen) Close() error { return nil }

func (k keptOpen) StagesPuts() bool {
	s, ok := k.Driver.(driver.Stager)
	return ok && s.StagesPuts()
}

func (k keptOpen) As(i any) bool {
	a, ok := k.Driver.(driver.Aser)
	return ok && a.As(i)
}

type keptOpenAppender struct {
	keptOpen
	driver.Appender
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
