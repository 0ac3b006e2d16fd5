package reader

import (
	"context"
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
