package torture_test

import (
	"context"
	"testing"

	"github.com/redokit/redokit/backends/local"
	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/blobtest"
	"github.com/redokit/redokit/conformance/torture"
)

func runOn(t *testing.T, inner blob.Driver, seed uint64, s blobtest.Schedule) *torture.Report {
	l := blobtest.NewLiar(inner, s)
	rep, err := torture.Run(context.Background(), torture.Config{Bucket: l.Bucket(), Clean: blob.NewBucket(inner), Liar: l, Seed: seed, Logf: t.Logf})
	if err != nil {
		t.Log(err)
	}
	t.Log(rep.Verdict())
	t.Log(rep.Faults)
	return rep
}

func TestQuickMem(t *testing.T) {
	rep := runOn(t, mem.NewDriver(), 1, blobtest.Schedule{})
	if !rep.OK() {
		t.Fatal(rep.Violations)
	}
}

func TestFaultMem(t *testing.T) {
	rep := runOn(t, mem.NewDriver(), 2, torture.Faults(2))
	if !rep.OK() {
		t.Fatal(rep.Violations)
	}
}

func TestFaultLocal(t *testing.T) {
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := runOn(t, d, 3, torture.Faults(3))
	if !rep.OK() {
		t.Fatal(rep.Violations)
	}
}

func TestQuickLocal(t *testing.T) {
	d, err := local.NewDriver(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := runOn(t, d, 1, blobtest.Schedule{})
	if !rep.OK() {
		t.Fatal(rep.Violations)
	}
}
