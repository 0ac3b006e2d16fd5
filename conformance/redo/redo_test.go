package redo

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/conformance"
)

// ignoredIfMatch drops IfMatch (as a store that ignores If-Match does): a
// compare-and-swap overwrites whatever is there, so a fenced writer can
// still publish.
type ignoredIfMatch struct{ *mem.Driver }

func (d ignoredIfMatch) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	opts.IfMatch = ""
	return d.Driver.Put(ctx, key, r, size, opts)
}

// staleList leaves the last key of every listing page out (as a listing
// that lags behind the newest writes): the reader misses a segment.
type staleList struct{ *mem.Driver }

func (d staleList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := d.Driver.List(ctx, opts)
	if err == nil && page.NextToken == "" && len(page.Objects) > 1 && strings.Contains(opts.Prefix, "/seg/") {
		page.Objects = page.Objects[:len(page.Objects)-1]
	}
	return page, err
}

// shortRange returns one byte less than a bounded range asks for and no
// error (as a client that treats a cut connection as the end of the body).
type shortRange struct{ *mem.Driver }

func (d shortRange) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if length > 0 {
		length--
	}
	return d.Driver.NewRangeReader(ctx, key, offset, length)
}

// deleteIgnored acknowledges deletes and keeps the objects.
type deleteIgnored struct{ *mem.Driver }

func (deleteIgnored) Delete(ctx context.Context, keys []string) error { return ctx.Err() }

// memHarness certifies the mem backend.
var memHarness = Harness{Harness: conformance.Harness{
	MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
		return mem.New(), nil
	},
	ConditionalWrites: true,
}}

// brokenCase is a driver with one rule a redo log relies on broken.
type brokenCase struct {
	name     string
	driver   func() driver.Driver
	mustFail []string // under both Plain and Prefixed
	mustPass []string // under both: the bug is not blamed on unrelated rules
}

var redoBrokenCases = []brokenCase{
	{
		name:     "IgnoredIfMatch",
		driver:   func() driver.Driver { return ignoredIfMatch{mem.NewDriver()} },
		mustFail: []string{"Fencing"},
		mustPass: []string{"ReadBack", "Corruption", "GC"},
	},
	{
		name:     "StaleList",
		driver:   func() driver.Driver { return staleList{mem.NewDriver()} },
		mustFail: []string{"ReadBack", "GC"},
	},
	{
		name:     "ShortRange",
		driver:   func() driver.Driver { return shortRange{mem.NewDriver()} },
		mustFail: []string{"ReadBack", "Restart", "Watermark"},
	},
	{
		name:     "DeleteIgnored",
		driver:   func() driver.Driver { return deleteIgnored{mem.NewDriver()} },
		mustFail: []string{"GC"},
		mustPass: []string{"ReadBack", "Restart", "Fencing", "Watermark"},
	},
}

// TestRedoBrokenDrivers proves that Run catches drivers that pass for
// the blob calls a redo log makes but break what it relies on: each fails the
// subtests named for the rule, and passes some it does not break.
func TestRedoBrokenDrivers(t *testing.T) {
	for _, c := range redoBrokenCases {
		t.Run(c.name, func(t *testing.T) {
			h := Harness{Harness: conformance.Harness{
				MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
					return blob.NewBucket(c.driver()), nil
				},
				ConditionalWrites: true,
			}}
			rec := conformance.NewRecorder()
			rec.Run(func(t conformance.T) { RunOn(t, h) })
			rec.Expect(t, c.mustFail, c.mustPass)
		})
	}
}

// TestRedoOnRecorder: the mem backend passes Run on the recorder too, so
// the broken drivers' failures are their own.
func TestRedoOnRecorder(t *testing.T) {
	rec := conformance.NewRecorder()
	rec.Run(func(t conformance.T) { RunOn(t, memHarness) })
	if f := rec.Failed(); len(f) > 0 {
		t.Fatalf("failed on the recorder: %v\n%s", f, strings.Join(rec.Messages(""), "\n"))
	}
	for _, name := range []string{"Plain/ReadBack", "Plain/GC", "Prefixed/Fencing"} {
		if rec.Get(name) == nil {
			t.Errorf("%s did not run", name)
		}
	}
}

// TestRedoNeedsConditionalWrites: a harness without conditional writes is
// skipped, and one that gives no reason fails.
func TestRedoNeedsConditionalWrites(t *testing.T) {
	rec := conformance.NewRecorder()
	rec.Run(func(t conformance.T) {
		RunOn(t, Harness{Harness: conformance.Harness{
			MakeBucket:              memHarness.MakeBucket,
			ConditionalWritesReason: "this store has no If-Match",
		}})
	})
	if res := rec.Get(""); res == nil || res.Failed || !res.Skipped {
		t.Fatalf("without conditional writes: %+v, want a skip", res)
	}
	rec = conformance.NewRecorder()
	rec.Run(func(t conformance.T) {
		RunOn(t, Harness{Harness: conformance.Harness{MakeBucket: memHarness.MakeBucket}})
	})
	if res := rec.Get(""); res == nil || !res.Failed {
		t.Fatalf("without conditional writes or a reason: %+v, want a failure", res)
	}
}

// TestRedoRefusesListSettle: a harness that declares a settle time for
// listings is refused, with the reason, before any subtest runs: a redo log
// proves completeness from listings, and a listing that lags cannot prove
// absence. It is refused whatever the driver, even one whose listings keep
// up, and whatever else the harness declares.
func TestRedoRefusesListSettle(t *testing.T) {
	for _, noCAS := range []bool{false, true} {
		h := memHarness
		h.ListSettle = 100 * time.Millisecond
		if noCAS {
			h.ConditionalWrites, h.ConditionalWritesReason = false, "no If-Match"
		}
		rec := conformance.NewRecorder()
		rec.Run(func(t conformance.T) { RunOn(t, h) })
		res := rec.Get("")
		if res == nil || !res.Failed || res.Skipped {
			t.Fatalf("conditional writes %v: RunOn with ListSettle = %v: %+v, want a failure", !noCAS, h.ListSettle, res)
		}
		msg := strings.Join(res.Errors, "\n")
		for _, want := range []string{"ListSettle", "read-after-write", "cannot prove absence"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the refusal does not say %q: %s", want, msg)
			}
		}
		if all := rec.Results(); len(all) > 1 {
			t.Errorf("subtests ran on a refused harness: %v", all[1].Name)
		}
	}
}
