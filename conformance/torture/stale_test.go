package torture_test

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/blob/driver"
	"github.com/redokit/redokit/conformance/torture"
	"github.com/redokit/redokit/meta"
)

// staleScheduleFor is the stale-read schedule of one seed (see
// blobtest.Stale). The objects served stale go round: both kinds, the meta
// object alone, the writer states alone. Consistent schedules serve only
// consistent windows (an old ETag with its old body: a restored version, a
// lagging replica); torn ones make half or all of their windows torn (the
// current ETag with an old body). One schedule in two adds the honest
// faults of the fault tier, whose lost answers make the coordinator and
// the writers re-read (and so meet stale versions) more; one consistent
// schedule in two makes segment listings lag (blobtest.Schedule.ListLag),
// which a reader proves wrong from fresh writer states and not from stale
// ones.
func staleScheduleFor(seed uint64, torn bool) (blobtest.Schedule, string) {
	ss := blobtest.StaleSchedule{Seed: seed, Start: 0.15, Calls: 6}
	var what []string
	switch seed % 3 {
	case 0:
		what = append(what, "meta and states")
	case 1:
		ss.Kinds = []blobtest.PutKind{blobtest.KindMeta}
		what = append(what, "meta only")
	case 2:
		ss.Kinds = []blobtest.PutKind{blobtest.KindState}
		what = append(what, "states only")
	}
	if torn {
		ss.Torn = []float64{0.5, 1}[(seed/3)%2]
		what = append(what, fmt.Sprintf("torn %.0f%%", ss.Torn*100))
	} else {
		what = append(what, "consistent")
	}
	s := blobtest.Schedule{Seed: seed}
	if seed%4 == 0 || seed%4 == 2 {
		s = torture.Faults(seed)
		what = append(what, "honest faults")
	}
	if !torn && seed%4 >= 2 {
		s.ListLag = 0.3
		what = append(what, "lagging listings")
	}
	s.Stale = &ss
	return s, strings.Join(what, ", ")
}

// staleOutcome is what one stale schedule did.
type staleOutcome struct {
	seed               uint64
	what               string
	rep                *torture.Report
	serves, torn, lags int
}

func runStaleSchedule(t *testing.T, backend string, seed uint64, torn bool, steps int) staleOutcome {
	var inner driver.Driver
	switch backend {
	case "mem":
		inner = mem.NewDriver()
	case "local":
		d, err := local.NewDriver(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		inner = d
	}
	sched, what := staleScheduleFor(seed, torn)
	l := blobtest.NewLiar(inner, sched)
	rep, err := torture.Run(t.Context(), torture.Config{
		Bucket: l.Bucket(), Clean: blob.NewBucket(inner), Liar: l, Seed: seed, Steps: steps,
		Writers: 3, Spans: 4, GrowSpans: 3, OpTimeout: 20 * time.Second,
	})
	if err != nil && rep == nil {
		t.Fatalf("%s seed %d: %v", backend, seed, err)
	}
	return staleOutcome{seed: seed, what: what, rep: rep,
		serves: l.Count(blobtest.ActStale) + l.Count(blobtest.ActStaleTorn), torn: l.Count(blobtest.ActStaleTorn),
		lags: l.Count(blobtest.ActListLag)}
}

// TestStaleSchedules is the stale-read tier: REDOKIT_STALE_SCHEDULES seeded
// schedules (default 100; 1,000 or more for a full run), half consistent
// and half torn (subtests), on mem and one in ten on local disk. Each is a
// log with three writers failing over, a coordinator ticking and moving
// the checkpoint, spans added during the run behind DDL barriers (through
// coordinators of their own), GC and readers, while a blobtest.Stale
// answers stats and reads of the meta object and the writer states from
// older versions. Each must end with no acknowledged event lost
// (acknowledged-lost, with the stale reads off), no read that returned
// short without an error (read-short: a read returns every event its range
// promises or fails, and an error matching meta.ErrStale is the expected
// way to fail), no epoch held by two opens of a writer ID (epoch-unique),
// and no other rule broken. It counts the stale serves and how many
// operations failed with meta.ErrStale, so that a run that served nothing
// stale, or caught nothing, shows. REDOKIT_STALE_SEED=N runs that seed
// alone (in both subtests); REDOKIT_STALE_STEPS sets the steps of each
// (default 60).
func TestStaleSchedules(t *testing.T) {
	n := envInt(t, "REDOKIT_STALE_SCHEDULES", 100)
	steps := envInt(t, "REDOKIT_STALE_STEPS", 60)
	first := uint64(1)
	counts := map[bool]int{false: (n + 1) / 2, true: n / 2}
	if v := os.Getenv("REDOKIT_STALE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("REDOKIT_STALE_SEED=%q: %v", v, err)
		}
		first, counts = s, map[bool]int{false: 1, true: 1}
	}
	for _, torn := range []bool{false, true} {
		name := map[bool]string{false: "consistent", true: "torn"}[torn]
		t.Run(name, func(t *testing.T) { staleTier(t, first, counts[torn], torn, steps) })
	}
}

func staleTier(t *testing.T, first uint64, n int, torn bool, steps int) {
	var (
		serves, tornServes, caught, idle, bad int
		spansAdded, opens, reads, lags        int64
		byRule                                = map[string]int{}
		schedulesByRule                       = map[string]int{}
	)
	for i := range n {
		seed := first + uint64(i)
		backend := "mem"
		if seed%10 == 0 {
			backend = "local"
		}
		o := runStaleSchedule(t, backend, seed, torn, steps)
		rep := o.rep
		serves, tornServes, caught = serves+o.serves, tornServes+o.torn, caught+int(rep.Counts.StaleCaught)
		spansAdded, opens, reads = spansAdded+rep.Counts.SpansAdded, opens+rep.Counts.Opens, reads+rep.Counts.Reads+rep.Counts.ReadErrors
		lags += int64(o.lags)
		if o.serves == 0 {
			idle++
		}
		if testing.Verbose() || !rep.OK() {
			t.Logf("%s seed %d (%s): %d stale serves (%d torn), %d caught by meta.ErrStale; %d spans added, %d opens\n%s\nfaults: %s",
				backend, seed, o.what, o.serves, o.torn, rep.Counts.StaleCaught, rep.Counts.SpansAdded, rep.Counts.Opens, rep.Verdict(), rep.Faults)
		}
		if rep.OK() {
			continue
		}
		bad++
		for _, r := range rep.BrokenRules() {
			schedulesByRule[r]++
		}
		for _, v := range rep.Violations {
			byRule[v.Rule]++
			t.Errorf("%s seed %d (%s; rerun with REDOKIT_STALE_SEED=%d): %s", backend, seed, o.what, seed, v)
		}
	}
	t.Logf("%d stale schedules: %d stale serves (%d torn), %d operations failed with meta.ErrStale; %d schedules served nothing stale; %d segments left out of lagging listings; %d spans added, %d opens, %d reads",
		n, serves, tornServes, caught, idle, lags, spansAdded, opens, reads)
	if bad > 0 {
		var parts []string
		for _, r := range slices.Sorted(maps.Keys(schedulesByRule)) {
			parts = append(parts, fmt.Sprintf("%s in %d schedules (%d violations shown)", r, schedulesByRule[r], byRule[r]))
		}
		t.Errorf("%d of %d stale schedules broke rules: %s", bad, n, strings.Join(parts, "; "))
	}
	if n >= 20 && idle > n/2 {
		t.Errorf("%d of %d schedules served nothing stale: the tier checks too little", idle, n)
	}
}

// TestStaleTornFreshCoordinator is the smallest trial of a torn read: a
// coordinator opened while the store pairs the meta object's current ETag
// with an older body (one from before a span's registration and a
// barrier) must not write that body forward. Either its first update
// fails, or the meta object still holds the span and the barrier after it.
func TestStaleTornFreshCoordinator(t *testing.T) {
	ctx := t.Context()
	inner := mem.NewDriver()
	clean := blob.NewBucket(inner)
	st := blobtest.NewStale(inner, blobtest.StaleSchedule{Seed: 1, Start: 1, Calls: 1 << 20, Torn: 1, Kinds: []blobtest.PutKind{blobtest.KindMeta}})
	st.SetServing(false)
	b := st.Bucket()
	c1, err := meta.OpenCoordinator(ctx, b, "log", &meta.CoordinatorOptions{StartTs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() error{
		func() error { return c1.AddSpan(ctx, 1, 1000) },
		func() error { return c1.AddBarrier(ctx, "create-t2", 1005) },
		func() error { return c1.AddSpan(ctx, 2, 1005) },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	st.SetServing(true)
	c2, err := meta.OpenCoordinator(ctx, b, "log", nil)
	if err != nil {
		t.Logf("the coordinator refused to open on the torn read: %v", err)
		return
	}
	err = c2.ReleaseBarrier(ctx, "another")
	m, _, rerr := meta.ReadMeta(ctx, clean, "log")
	if rerr != nil {
		t.Fatal(rerr)
	}
	_, hasSpan := m.Spans[2]
	if err == nil && (!hasSpan || len(m.Barriers) == 0) {
		t.Fatalf("a coordinator opened on a torn read (the current ETag with the body from before span 2 and the barrier) wrote that body forward: the meta object now holds spans %v and barriers %v (%d stale serves)", m.Spans, m.Barriers, st.Serves())
	}
	t.Logf("update: %v; the meta object holds spans %v and barriers %v", err, m.Spans, m.Barriers)
}
