package redo

import (
	"context"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/conformance"
	"github.com/redokit/redokit/conformance/torture"
)

// TestFaultTierCatchesBrokenStores: a store that breaks its contract the
// ways the Liar's broken modes do fails Run's Faults tier, in the
// subtests of the rules it breaks, with evidence.
func TestFaultTierCatchesBrokenStores(t *testing.T) {
	cases := []struct {
		name  string
		sched blobtest.Schedule
		// anyOf: at least one of these rules must fail.
		anyOf []string
	}{
		// Segments: a misreported state or meta put may heal (its writer
		// reads the object back), a lost segment cannot.
		{"MisreportedLostAnswers", blobtest.Schedule{Seed: 5, LostAnswer: 0.1, Broken: blobtest.BrokenMisreport, Kinds: []blobtest.PutKind{blobtest.KindSegment}},
			[]string{torture.RuleAckLost, torture.RuleReadShort}},
		{"ListSkips", blobtest.Schedule{Seed: 6, Broken: blobtest.BrokenListSkip, ListSkip: 1, SkipRecent: true},
			[]string{torture.RuleAckLost, torture.RuleReadShort}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := Harness{Harness: conformance.Harness{
				MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
					return blobtest.NewLiar(mem.NewDriver(), c.sched).Bucket(), nil
				},
				ConditionalWrites: true,
			}}
			rec := conformance.NewRecorder()
			rec.Run(func(t conformance.T) {
				t.Run("Faults", func(t conformance.T) {
					r := &redoSuite{h: h}
					r.faultTier(t)
				})
			})
			if res := rec.Get("Faults"); res == nil || !res.Failed {
				t.Fatalf("the fault tier passed on a store that %s", c.name)
			}
			var caught []string
			for _, rule := range c.anyOf {
				if res := rec.Get("Faults/" + rule); res != nil && res.Failed {
					caught = append(caught, rule)
					t.Logf("caught by %s: %s", rule, rec.Messages("Faults/" + rule)[0])
				}
			}
			if len(caught) == 0 {
				t.Errorf("none of %v failed; failed: %v\n%s", c.anyOf, rec.Failed(), strings.Join(rec.Messages(""), "\n"))
			}
		})
	}
}
