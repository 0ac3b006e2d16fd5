package sqlsink_test

import (
	"context"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// applyWith applies events into a fresh sink of e opened with so, and
// returns Run's result and error (the tests of issue 15 check both).
func (e *env) i15Apply(so *apply.SinkOptions, events []*codec.Event, o *apply.Options) (*apply.Result, error) {
	e.t.Helper()
	s := e.open(so)
	defer s.Close()
	return apply.Run(context.Background(), sliceSource(events), s, o)
}

// mustApply is applyWith that fails the test on error.
func (e *env) i15MustApply(so *apply.SinkOptions, events []*codec.Event, o *apply.Options) *apply.Result {
	e.t.Helper()
	res, err := e.i15Apply(so, events, o)
	if err != nil {
		e.t.Fatalf("Run: %v", err)
	}
	return res
}
