package redokit

import (
	"context"

	"github.com/redokit/redokit/reader"
)

// ProblemMeta is the kind Verify gives to what it finds in the meta object
// and the writer states, against each other and the segments.
const ProblemMeta = reader.ProblemMeta

// Verify checks the whole log: reader.Verify with RequireMeta set (a
// Log's recovery range comes from its meta object). That is every
// segment, block and chain, and the meta object and the writer states
// against each other and against the segment names — the freshness rules,
// a checkpoint at or below the resolved ts, a state for every live writer,
// no segment from an epoch its writer never reached. One pass lists the
// log once and reads the meta object once, then each writer state once.
// Problems are sorted errors first.
func (l *Log) Verify(ctx context.Context, opts *reader.VerifyOptions) (*reader.Report, error) {
	var o reader.VerifyOptions
	if opts != nil {
		o = *opts
	}
	o.RequireMeta = true
	return reader.Verify(ctx, l.b, l.id, &o)
}
