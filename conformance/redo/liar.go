package redo

import (
	"context"
	"os"
	"strconv"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/torture"
)

// FaultSeed is the seed of the Faults tier; REDOKIT_FAULT_SEED
// overrides it, to replay a failure on another backend.
const FaultSeed = 12

// faultTier is the lying-store tier of Run (subtest Faults): the history checker
// (conformance/torture) runs its workload — writers with failover and
// zombies, the coordinator and a checkpoint-moving sink, GC and readers
// during GC — through a blobtest.Liar over the harness's bucket that loses
// answers of stored writes, refuses writes, delays and reorders answers on
// every kind of put. It must lose no acknowledged event and fence no writer
// wrongly: each rule of the checker is a subtest, failed with its evidence.
func (r *redoSuite) faultTier(t conformance.T) {
	b := r.h.Bucket(t, r.prefixed)
	seed := uint64(FaultSeed)
	if v := os.Getenv("REDOKIT_FAULT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("REDOKIT_FAULT_SEED=%q: %v", v, err)
		}
		seed = n
	}
	rep := runFaultTier(t, b, torture.Faults(seed), seed)
	t.Logf("%s\nfaults: %s", rep.Verdict(), rep.Faults)
	for _, rule := range torture.Rules {
		t.Run(rule, func(t conformance.T) {
			for _, v := range rep.Violations {
				if v.Rule == rule {
					t.Errorf("seed %d (REDOKIT_FAULT_SEED replays it): %s", seed, v.Evidence)
				}
			}
		})
	}
}

// runFaultTier runs the checker's workload through a Liar with schedule s
// over b, and returns its report.
func runFaultTier(t conformance.T, b *blob.Bucket, s blobtest.Schedule, seed uint64) *torture.Report {
	t.Helper()
	l := blobtest.NewLiar(blobtest.BucketDriver(b), s)
	// The Liar's bucket goes through b, which the suite closes.
	lb := l.Bucket()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	rep, err := torture.Run(ctx, torture.Config{
		Bucket: lb, Clean: b, Liar: l, LogID: redoLogID, Seed: seed,
		Writers: 2, Spans: 5, Steps: 60, Duration: 10 * time.Second,
		// One retry: some flushes fail under the faults, are not
		// acknowledged, and their writers fail over.
		RetryAttempts: 1,
	})
	if rep == nil {
		t.Fatalf("the fault tier could not start: %v", err)
	}
	if err != nil {
		t.Logf("the workload stopped early: %v", err)
	}
	return rep
}
