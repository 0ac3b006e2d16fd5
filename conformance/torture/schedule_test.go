package torture_test

import (
	"os"
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
)

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}

// scheduleFor is the fault schedule of one seed: one in two loses answers
// on every kind of put; the others lose (more) answers on one kind only,
// in turn, so that each kind is hit hard on its own.
func scheduleFor(seed uint64) (blobtest.Schedule, string) {
	s := torture.Faults(seed)
	if seed%2 == 0 {
		return s, "every kind"
	}
	k := blobtest.AllKinds[(seed/2)%uint64(len(blobtest.AllKinds))]
	s.Kinds = []blobtest.PutKind{k}
	s.LostAnswer, s.Fail = 0.15, 0.05
	return s, string(k)
}

// staged reports whether the schedule of seed forces staged runs: every
// other pair of seeds (2, 3, 6, 7, ...), so that as many of them lose
// answers on every kind of put as on one, and a third give no retries.
// Its writers get torture.StageQuota (and lagging spans), and stage.
func staged(seed uint64) bool { return seed%4 >= 2 }

// runSchedule runs one seeded schedule on a fresh store and returns its
// report.
func runSchedule(t *testing.T, backend string, seed uint64, steps int) (*torture.Report, string) {
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
	sched, what := scheduleFor(seed)
	l := blobtest.NewLiar(inner, sched)
	clean := blob.NewBucket(inner)
	// One schedule in three gives the writers no retry: faults then fail
	// flushes, which are not acknowledged, and writers fail over.
	retries := 0
	if seed%3 == 0 {
		retries, what = -1, what+", no retries"
	}
	var quota int64
	if staged(seed) {
		quota, what = torture.StageQuota, what+", staging forced"
	}
	rep, err := torture.Run(t.Context(), torture.Config{
		Bucket: l.Bucket(), Clean: clean, Liar: l, Seed: seed, Steps: steps, OpTimeout: 20 * time.Second,
		RetryAttempts: retries, MemoryQuota: quota,
	})
	if err != nil && rep == nil {
		t.Fatalf("%s seed %d: %v", backend, seed, err)
	}
	return rep, what
}

// TestFaultSchedules runs REDOKIT_FAULT_SCHEDULES seeded schedules (default
// 20; scripts/test.sh sets 100) on mem and on local disk, with lost answers
// on every kind of put: no acknowledged event may be lost, no writer fenced
// wrongly, no read end short without an error. Every other pair of seeds
// (staged) forces staged runs: a writer memory quota the workload fills
// (torture.StageQuota), so that writers store events above their committed
// ts before they are resolved, and takeovers fence epochs holding such
// events, which no read may return; such a schedule fails if its writers
// made no stage cut. REDOKIT_FAULT_SEED=N runs that seed alone;
// REDOKIT_FAULT_STEPS sets the steps of each (default 100 on mem, 60 on
// local disk). A failure names its seed and backend.
func TestFaultSchedules(t *testing.T) {
	n := envInt(t, "REDOKIT_FAULT_SCHEDULES", 20)
	// Local disk fsyncs every flush: fewer steps keep its share of the
	// default run near that of mem.
	steps := map[string]int{"mem": envInt(t, "REDOKIT_FAULT_STEPS", 100), "local": envInt(t, "REDOKIT_FAULT_STEPS", 60)}
	first := uint64(1)
	if v := os.Getenv("REDOKIT_FAULT_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("REDOKIT_FAULT_SEED=%q: %v", v, err)
		}
		first, n = s, 1
	}
	for _, backend := range []string{"mem", "local"} {
		t.Run(backend, func(t *testing.T) {
			var faults, stagedRuns int
			var c torture.Counts
			for i := range n {
				seed := first + uint64(i)
				rep, what := runSchedule(t, backend, seed, steps[backend])
				faults += strSum(rep.Faults)
				if !rep.OK() || testing.Verbose() {
					t.Logf("%s seed %d (lost answers on %s): %s\nfaults: %s", backend, seed, what, rep.Verdict(), rep.Faults)
				}
				for _, v := range rep.Violations {
					t.Errorf("%s seed %d (lost answers on %s; rerun with REDOKIT_FAULT_SEED=%d): %s", backend, seed, what, seed, v)
				}
				if staged(seed) {
					stagedRuns++
					c.StageCuts += rep.Counts.StageCuts
					c.StagedEvents += rep.Counts.StagedEvents
					c.QuotaOvercommits += rep.Counts.QuotaOvercommits
					c.Uncommitted += rep.Counts.Uncommitted
					if rep.Counts.StageCuts == 0 {
						t.Errorf("%s seed %d (lost answers on %s; rerun with REDOKIT_FAULT_SEED=%d): staging was forced, but the writers made no stage cut: %s", backend, seed, what, seed, rep.Staging())
					}
				}
			}
			t.Logf("%d schedules, %d faults injected; %d with staging forced: %d stage cuts staged %d events, %d writes over the quota, %d events above fenced epochs' committed ts left out",
				n, faults, stagedRuns, c.StageCuts, c.StagedEvents, c.QuotaOvercommits, c.Uncommitted)
		})
	}
}

// strSum adds up the counts of a Liar summary ("k=v k=v").
func strSum(s string) int {
	total := 0
	for _, f := range strings.Fields(s) {
		if _, v, ok := strings.Cut(f, "="); ok {
			n, _ := strconv.Atoi(v)
			total += n
		}
	}
	return total
}
