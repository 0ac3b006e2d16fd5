package sinkgate

import (
	"context"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// ApplyTo returns the Downstream that replays each released batch into sink
// with apply.Run and opts: rows batched into multi-row statements and
// transactions, DDLs run alone between them, each table's progress
// committed with its rows. A batch is the []codec.Event the gate releases,
// replayed as is through apply.SliceSource.
//
// The progress is what makes Apply idempotent, as the gate needs: a batch
// that failed part way comes again, and the row changes of each table at or
// below the commit ts its committed progress records are skipped, so none is
// applied twice (which would duplicate the rows of a table without a key)
// and none is lost. That holds while each table's row changes reach the
// downstream in commit-ts order, which the gate gives when each table is
// one span: a span that fails over to this gate catches up behind events
// already released, but its table's events are all its own, and those its
// dead owner applied are skipped.
//
// DDLs are the exception. apply.Run records one DDL mark per downstream and
// skips every row at or below it, which assumes one stream in commit-ts
// order; several gates writing one downstream, or a span catching up, break
// that. So ApplyTo hides the recorded DDL mark from Run and records none
// (it clears it): a DDL in a batch that comes again runs again, and one
// whose effect is already there (the table exists, the column was added) is
// counted as applied, as apply does for DDLs the downstream ran past the
// log's checkpoint. A DDL that does not say so when run twice (a DROP TABLE
// followed, in the same batch, by a CREATE TABLE of the same name) can then
// undo rows committed after it. A recovery (apply.Run over the log) into
// the same downstream therefore skips no rows for DDLs: only the tables'
// own progress.
func ApplyTo(sink apply.Sink, opts *apply.Options) Downstream {
	return &applyDownstream{sink: tableMarks{sink}, opts: opts}
}

type applyDownstream struct {
	sink apply.Sink
	opts *apply.Options
}

// Apply replays one batch; the gate keeps it, and retries it, on failure.
func (d *applyDownstream) Apply(ctx context.Context, events []codec.Event) error {
	_, err := apply.Run(ctx, apply.SliceSource(events), d.sink, d.opts)
	return err
}

// tableMarks is a sink whose progress is its tables' alone: see ApplyTo.
type tableMarks struct{ apply.Sink }

func (s tableMarks) Progress(ctx context.Context) (apply.Progress, error) {
	p, err := s.Sink.Progress(ctx)
	p.DDL = apply.DDLMark{}
	return p, err
}

func (s tableMarks) ApplyDDL(ctx context.Context, ddl *codec.DDL, _ apply.DDLMark) error {
	return s.Sink.ApplyDDL(ctx, ddl, apply.DDLMark{})
}

// MaxOpenTxs passes the sink's limit on (SQLite has one writer).
func (s tableMarks) MaxOpenTxs() int {
	if l, ok := s.Sink.(apply.TxLimiter); ok {
		return l.MaxOpenTxs()
	}
	return 0
}

var (
	_ Downstream      = (*applyDownstream)(nil)
	_ apply.TxLimiter = tableMarks{}
)
