package meta

import (
	"context"
	"errors"
	"testing"

	"github.com/redokit/redokit/backends/mem"
)

// TestRewindCheckpoint: the operator's rewind moves the checkpoint back, by
// compare-and-swap (a second coordinator's change in between is kept), and
// never above the global resolved ts.
func TestRewindCheckpoint(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	c, err := OpenCoordinator(ctx, b, "log", &CoordinatorOptions{StartTs: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RewindCheckpoint(ctx, 101); !errors.Is(err, ErrCheckpointAhead) {
		t.Fatalf("rewind above the resolved ts = %v, want ErrCheckpointAhead", err)
	}
	// Another coordinator changes the object: the rewind must not lose it.
	c2, err := OpenCoordinator(ctx, b, "log", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.AddWriter(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.RewindCheckpoint(ctx, 40); err != nil {
		t.Fatal(err)
	}
	m, _, err := ReadMeta(ctx, b, "log")
	if err != nil {
		t.Fatal(err)
	}
	if m.CheckpointTs != 40 || m.ResolvedTs != 100 {
		t.Fatalf("after the rewind: checkpoint %d, resolved %d; want 40, 100", m.CheckpointTs, m.ResolvedTs)
	}
	if _, ok := m.Writers["x"]; !ok {
		t.Fatalf("the rewind lost the other coordinator's writer: %+v", m.Writers)
	}
	// The ordinary rule still holds afterwards.
	if err := c.SetCheckpoint(ctx, 39); !errors.Is(err, ErrBackwards) {
		t.Fatalf("SetCheckpoint backwards after a rewind = %v", err)
	}
}
