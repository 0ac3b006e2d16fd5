package reader

import (
	"context"
	"slices"
	"testing"

	"github.com/redokit/redokit/internal/layout"
)

// A log written without the meta layer verifies clean; with RequireMeta
// (what redokit.Log.Verify asks) its missing meta object is an error
// naming it, placed with the errors first.
func TestVerifyRequireMeta(t *testing.T) {
	b := newMem(t)
	writeAll(t, b, scenario())
	ctx := context.Background()
	rep, err := Verify(ctx, b, testLog, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Fatalf("without RequireMeta: %v", rep.Problems)
	}
	rep, err = Verify(ctx, b, testLog, &VerifyOptions{RequireMeta: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != ProblemMeta || rep.Problems[0].Key != layout.Meta(testLog) || rep.Problems[0].Severity != Error {
		t.Fatalf("with RequireMeta: %v; want one meta error naming %s", rep.Problems, layout.Meta(testLog))
	}
}

// A writer the meta object lists but that never opened (added, no state
// object, no segment, no epoch the coordinator saw) is not an error: a
// torture run whose writer processes were killed before they opened failed
// verify on it. One the coordinator saw open whose state object is gone is.
func TestVerifyWriterNotOpened(t *testing.T) {
	b := newMem(t)
	ctx := context.Background()
	w, c := freshLog(t, b, 2)
	defer w.Close(ctx)
	if err := c.AddWriter(ctx, "later"); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, b, testLog, &VerifyOptions{RequireMeta: true})
	if err != nil {
		t.Fatal(err)
	}
	later := layout.WriterState(testLog, "later")
	if len(rep.Problems) != 1 || rep.Problems[0].Key != later || rep.Problems[0].Severity != Info {
		t.Fatalf("a writer added and never opened: %v; want one info naming %s", rep.Problems, later)
	}
	if err := b.Delete(ctx, layout.WriterState(testLog, "w")); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(ctx, b, testLog, &VerifyOptions{RequireMeta: true})
	if err != nil {
		t.Fatal(err)
	}
	gone := layout.WriterState(testLog, "w")
	if !slices.ContainsFunc(rep.Errors(), func(p Problem) bool { return p.Key == gone && p.Kind == ProblemMeta }) {
		t.Fatalf("a writer seen open whose state object is gone: %v; want an error naming %s", rep.Problems, gone)
	}
}
