package sinkgate

import (
	"context"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// ApplyTo returns the Downstream that replays each released batch into sink
// with apply.Run and opts: rows batched into multi-row statements and
// transactions, DDLs run alone between them. A batch is the []codec.Event the
// gate releases, replayed as is through apply.SliceSource.
//
// It keeps no progress in the downstream: it reads none, so Run skips
// nothing, and it records none, so the progress a recovery (`redokit apply`,
// apply.Run over the log) keeps in the same downstream is left as it was.
// Idempotence comes from the sink's safe mode instead, as in a CDC sink: an
// insert or update writes the whole row by its key (updating it in place
// where it is there), a delete deletes by key, and a DDL whose effect is already there (the table exists, the
// column was added) counts as applied. So a batch that failed part way and
// comes again, or a span that catches up behind events already released,
// or a recovery that replays (checkpoint, global resolved] after the gate
// wrote part of it, ends where one clean pass would: a DROP TABLE and a
// CREATE TABLE of the same name that run again are followed by their
// table's rows again. Progress marks cannot give that: a DDL that runs
// again would undo rows the marks then skip.
//
// The cost is a table without a primary or unique key: a row change in a
// batch that comes again is applied again (an insert twice is two rows; a
// delete, which matches every column exactly, removes one more of identical
// rows). Give such tables a key.
func ApplyTo(sink apply.Sink, opts *apply.Options) Downstream {
	return &applyDownstream{sink: noMarks{sink}, opts: opts}
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

// noMarks is a sink that neither reads nor writes progress: see ApplyTo.
type noMarks struct{ apply.Sink }

func (s noMarks) Progress(context.Context) (apply.Progress, error) { return apply.Progress{}, nil }

func (s noMarks) ApplyDDL(ctx context.Context, ddl *codec.DDL, _ apply.DDLMark) error {
	return s.Sink.ApplyDDL(ctx, ddl, apply.DDLMark{})
}

func (s noMarks) Begin(ctx context.Context) (apply.Tx, error) {
	tx, err := s.Sink.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return noMarksTx{tx}, nil
}

// MaxOpenTxs passes the sink's limit on (SQLite has one writer).
func (s noMarks) MaxOpenTxs() int {
	if l, ok := s.Sink.(apply.TxLimiter); ok {
		return l.MaxOpenTxs()
	}
	return 0
}

type noMarksTx struct{ apply.Tx }

func (t noMarksTx) Commit(ctx context.Context, _ []apply.Mark) error { return t.Tx.Commit(ctx, nil) }

var (
	_ Downstream      = (*applyDownstream)(nil)
	_ apply.TxLimiter = noMarks{}
)
