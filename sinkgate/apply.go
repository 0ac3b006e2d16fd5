package sinkgate

import (
	"context"
	"errors"
	"math"

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
//
// Run sees the sink's optional interfaces of package apply as the sink has
// them, and none it lacks: apply.TxLimiter (SQLite's one writer),
// apply.CommitOrderer with the Tx's apply.GroupApplier (a downstream that
// checks foreign keys gets each upstream transaction whole, from one worker,
// its tables in the order the keys accept, whatever order the spans' events
// reached the gate in), apply.DDLTx (SQLite's DDLs inside the open
// transaction), apply.EventDDLScoper (SQLite's rows of other tables held
// across a DDL), apply.ConflictReporter and apply.CommitTsSplitter (a
// batch's commit ts in parts, memory bounded whatever its size). Only the
// progress is left out.
func ApplyTo(sink apply.Sink, opts *apply.Options) Downstream {
	return &applyDownstream{sink: withoutMarks(sink), opts: opts}
}

type applyDownstream struct {
	sink apply.Sink
	opts *apply.Options
}

// Apply replays one batch; the gate keeps it, and retries it, on failure.
// A commit ts of the batch that went to the sink in parts and then had to
// be applied whole (apply.ErrSplitTooLate) is applied again at once,
// holding every commit ts whole: the batch is in memory already, and
// retried as it was it would fail the same way every time.
func (d *applyDownstream) Apply(ctx context.Context, events []codec.Event) error {
	_, err := apply.Run(ctx, apply.SliceSource(events), d.sink, d.opts)
	if errors.Is(err, apply.ErrSplitTooLate) {
		var whole apply.Options
		if d.opts != nil {
			whole = *d.opts
		}
		whole.SplitBytes = math.MaxInt64
		_, err = apply.Run(ctx, apply.SliceSource(events), d.sink, &whole)
	}
	return err
}

// withoutMarks returns s wrapped in noMarks with the optional interfaces of
// package apply that s has, and only those: Run discovers them by type
// assertion, so a wrapper that hid CommitOrderer would have a downstream
// that checks foreign keys written by parallel workers in any table order,
// and one that claimed an interface the sink lacks would answer for it. A
// type gets no method at run time, so each combination is a type of its
// own (and noMarks.Begin does the same for the Tx). An optional interface
// added to package apply must be added here: the test that lists them
// fails until it is.
func withoutMarks(s apply.Sink) apply.Sink {
	w := noMarks{s}
	l, isL := s.(apply.TxLimiter)
	o, isO := s.(apply.CommitOrderer)
	c, isC := s.(apply.ConflictReporter)
	switch {
	case isL && isO && isC:
		return struct {
			noMarks
			apply.TxLimiter
			apply.CommitOrderer
			apply.ConflictReporter
		}{w, l, o, c}
	case isL && isO:
		return struct {
			noMarks
			apply.TxLimiter
			apply.CommitOrderer
		}{w, l, o}
	case isL && isC:
		return struct {
			noMarks
			apply.TxLimiter
			apply.ConflictReporter
		}{w, l, c}
	case isO && isC:
		return struct {
			noMarks
			apply.CommitOrderer
			apply.ConflictReporter
		}{w, o, c}
	case isL:
		return struct {
			noMarks
			apply.TxLimiter
		}{w, l}
	case isO:
		return struct {
			noMarks
			apply.CommitOrderer
		}{w, o}
	case isC:
		return struct {
			noMarks
			apply.ConflictReporter
		}{w, c}
	}
	return w
}

// noMarks is a sink that neither reads nor writes progress: see ApplyTo.
// Its method set is apply.Sink's, apply.DDLScoper's, apply.EventDDLScoper's
// and apply.CommitTsSplitter's; withoutMarks adds the rest.
type noMarks struct{ apply.Sink }

// DDLTables keeps the sink's apply.DDLScoper, and answers as a sink without
// one does otherwise (ok false: every worker commits before the DDL). Unlike
// the interfaces withoutMarks adds by combination, its absence has an
// answer of its own, so the wrapper always has it.
func (s noMarks) DDLTables(ctx context.Context, ddl *codec.DDL) ([]apply.Table, bool, error) {
	if sc, ok := s.Sink.(apply.DDLScoper); ok {
		return sc.DDLTables(ctx, ddl)
	}
	return nil, false, nil
}

// ScopesFromEvent keeps the sink's apply.EventDDLScoper, and answers as a
// sink without one does otherwise (false: with one worker, a DDL hands out
// every table's rows).
func (s noMarks) ScopesFromEvent() bool {
	es, ok := s.Sink.(apply.EventDDLScoper)
	return ok && es.ScopesFromEvent()
}

// SplitsCommitTs keeps the sink's apply.CommitTsSplitter, and answers as a
// sink without one does otherwise (false: every commit ts whole).
func (s noMarks) SplitsCommitTs() bool {
	sp, ok := s.Sink.(apply.CommitTsSplitter)
	return ok && sp.SplitsCommitTs()
}

func (s noMarks) Progress(context.Context) (apply.Progress, error) { return apply.Progress{}, nil }

func (s noMarks) ApplyDDL(ctx context.Context, ddl *codec.DDL, _ apply.DDLMark) error {
	return s.Sink.ApplyDDL(ctx, ddl, apply.DDLMark{})
}

// Begin returns the sink's transaction without its marks, keeping its
// apply.GroupApplier and apply.DDLTx (without the DDL's mark) when it has
// them.
func (s noMarks) Begin(ctx context.Context) (apply.Tx, error) {
	tx, err := s.Sink.Begin(ctx)
	if err != nil {
		return nil, err
	}
	g, isG := tx.(apply.GroupApplier)
	d, isD := tx.(apply.DDLTx)
	switch {
	case isG && isD:
		return struct {
			noMarksTx
			apply.GroupApplier
			noMarksDDLTx
		}{noMarksTx{tx}, g, noMarksDDLTx{d}}, nil
	case isG:
		return struct {
			noMarksTx
			apply.GroupApplier
		}{noMarksTx{tx}, g}, nil
	case isD:
		return struct {
			noMarksTx
			noMarksDDLTx
		}{noMarksTx{tx}, noMarksDDLTx{d}}, nil
	}
	return noMarksTx{tx}, nil
}

// noMarksDDLTx runs a DDL in the transaction without recording its mark.
type noMarksDDLTx struct{ d apply.DDLTx }

func (t noMarksDDLTx) ApplyDDL(ctx context.Context, ddl *codec.DDL, _ apply.DDLMark) error {
	return t.d.ApplyDDL(ctx, ddl, apply.DDLMark{})
}

// noMarksTx is a transaction that records no marks. Its method set is
// apply.Tx's alone; noMarks.Begin adds the rest.
type noMarksTx struct{ apply.Tx }

func (t noMarksTx) Commit(ctx context.Context, _ []apply.Mark) error { return t.Tx.Commit(ctx, nil) }

var (
	_ Downstream = (*applyDownstream)(nil)
	_ apply.Sink = noMarks{}
	_ apply.Tx   = noMarksTx{}
)
