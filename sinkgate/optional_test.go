package sinkgate

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// The optional interfaces of package apply: those a Sink may have
// (optionalSink) and those a Tx may have (optionalTx), which apply.Run, or a
// tool such as `redokit apply`, discovers by type assertion. ApplyTo's
// wrapper must keep each one the sink has and claim none it lacks.
// TestOptionalInterfacesListed fails when package apply declares one that
// is not listed here; TestApplyToKeepsOptionalInterfaces then fails until
// the wrapper keeps it.
var (
	optionalSink = []reflect.Type{
		reflect.TypeFor[apply.TxLimiter](),
		reflect.TypeFor[apply.CommitOrderer](),
		reflect.TypeFor[apply.ConflictReporter](),
	}
	optionalTx = []reflect.Type{
		reflect.TypeFor[apply.GroupApplier](),
		reflect.TypeFor[apply.DDLTx](),
	}
	// alwaysKept are optional interfaces whose absence has an answer of
	// its own (DDLScoper's ok false, EventDDLScoper's and
	// CommitTsSplitter's false): the wrapper always has them, and answers
	// as the sink does, or as a sink without them.
	alwaysKept = []reflect.Type{
		reflect.TypeFor[apply.DDLScoper](),
		reflect.TypeFor[apply.EventDDLScoper](),
		reflect.TypeFor[apply.CommitTsSplitter](),
	}
)

// TestOptionalInterfacesListed: every interface package apply declares,
// other than Sink and Tx themselves, is an optional interface listed above,
// and apply asserts no unnamed interface (which no list could name).
func TestOptionalInterfacesListed(t *testing.T) {
	dir := filepath.Join("..", "apply")
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				if _, ok := n.Type.(*ast.InterfaceType); ok && n.Name.IsExported() && n.TypeParams == nil {
					declared = append(declared, n.Name.Name)
				}
			case *ast.TypeAssertExpr:
				if _, ok := n.Type.(*ast.InterfaceType); ok {
					t.Errorf("%s: apply asserts an unnamed interface: declare it beside the optional interfaces of apply/sink.go, and list it here", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	listed := []string{"Sink", "Tx"}
	for _, it := range slices.Concat(optionalSink, optionalTx, alwaysKept) {
		if it.PkgPath() != reflect.TypeFor[apply.Sink]().PkgPath() {
			t.Errorf("%v is listed but is not package apply's", it)
		}
		listed = append(listed, it.Name())
	}
	for _, name := range declared {
		if !slices.Contains(listed, name) {
			t.Errorf("package apply declares interface %s, which this test does not list: if a Sink or a Tx may have it, list it in optionalSink or optionalTx and make ApplyTo's wrapper keep it (withoutMarks)", name)
		}
	}
	for _, name := range listed {
		if !slices.Contains(declared, name) {
			t.Errorf("%s is listed but package apply declares no such interface (a scan of %s that misses it?)", name, dir)
		}
	}
}

// What the fakes below saw through the wrapper.
type fakeLog struct {
	ddlMarks   []apply.DDLMark
	txDDLMarks []apply.DDLMark // DDLs run in a Tx (apply.DDLTx)
	marks      [][]apply.Mark
	groups     int
}

// fakeSink has the required methods only, with progress recorded; the
// method sets below add the optional interfaces one by one.
type fakeSink struct {
	log *fakeLog
	tx  apply.Tx
}

func (f fakeSink) Progress(context.Context) (apply.Progress, error) {
	return apply.Progress{Tables: map[apply.Table]uint64{{Schema: "db", Name: "t"}: 50}, DDL: apply.DDLMark{CommitTs: 40, Count: 1}}, nil
}
func (f fakeSink) Begin(context.Context) (apply.Tx, error) { return f.tx, nil }
func (f fakeSink) ApplyDDL(_ context.Context, _ *codec.DDL, m apply.DDLMark) error {
	f.log.ddlMarks = append(f.log.ddlMarks, m)
	return nil
}
func (fakeSink) Close() error { return nil }

type (
	limiter  struct{}
	orderer  struct{}
	reporter struct{}
)

func (limiter) MaxOpenTxs() int             { return 3 }
func (orderer) NeedsCommitOrder() bool      { return true }
func (reporter) Conflicts() apply.Conflicts { return apply.Conflicts{Replaced: 7, DeletesMissed: 8} }

type fakeTx struct{ log *fakeLog }

func (fakeTx) ApplyRows(context.Context, apply.Table, []*codec.RowChange) error { return nil }
func (t fakeTx) Commit(_ context.Context, marks []apply.Mark) error {
	t.log.marks = append(t.log.marks, marks)
	return nil
}
func (fakeTx) Rollback() error { return nil }

type grouper struct{ log *fakeLog }

func (g grouper) ApplyGroup(context.Context, []apply.TableRows) error {
	g.log.groups++
	return nil
}

type txDDLer struct{ log *fakeLog }

func (d txDDLer) ApplyDDL(_ context.Context, _ *codec.DDL, m apply.DDLMark) error {
	d.log.txDDLMarks = append(d.log.txDDLMarks, m)
	return nil
}

// fakeSinks returns sinks over base with every combination of the optional
// interfaces of optionalSink.
func fakeSinks(base fakeSink) []apply.Sink {
	return []apply.Sink{
		base,
		struct {
			fakeSink
			limiter
		}{base, limiter{}},
		struct {
			fakeSink
			orderer
		}{base, orderer{}},
		struct {
			fakeSink
			reporter
		}{base, reporter{}},
		struct {
			fakeSink
			limiter
			orderer
		}{base, limiter{}, orderer{}},
		struct {
			fakeSink
			limiter
			reporter
		}{base, limiter{}, reporter{}},
		struct {
			fakeSink
			orderer
			reporter
		}{base, orderer{}, reporter{}},
		struct {
			fakeSink
			limiter
			orderer
			reporter
		}{base, limiter{}, orderer{}, reporter{}},
	}
}

// fakeTxs returns transactions with every combination of the optional
// interfaces of optionalTx.
func fakeTxs(log *fakeLog) []apply.Tx {
	return []apply.Tx{
		fakeTx{log},
		struct {
			fakeTx
			grouper
		}{fakeTx{log}, grouper{log}},
		struct {
			fakeTx
			txDDLer
		}{fakeTx{log}, txDDLer{log}},
		struct {
			fakeTx
			grouper
			txDDLer
		}{fakeTx{log}, grouper{log}, txDDLer{log}},
	}
}

// has returns the interfaces of ifaces that v implements.
func has(v any, ifaces []reflect.Type) []string {
	var out []string
	for _, it := range ifaces {
		if reflect.TypeOf(v).Implements(it) {
			out = append(out, it.Name())
		}
	}
	return out
}

// TestApplyToKeepsOptionalInterfaces: for every combination of the optional
// interfaces of package apply that a sink and its Tx may have, the sink
// apply.Run is given through ApplyTo has exactly the same ones, and they
// answer as the sink does, while it still records no progress.
func TestApplyToKeepsOptionalInterfaces(t *testing.T) {
	ctx := context.Background()
	// The fakes must cover every combination, or a listed interface goes
	// untested.
	sinkSets, txSets := map[string]bool{}, map[string]bool{}
	for _, tx := range fakeTxs(&fakeLog{}) {
		txSets[strings.Join(has(tx, optionalTx), ",")] = true
		for _, s := range fakeSinks(fakeSink{tx: tx}) {
			sinkSets[strings.Join(has(s, optionalSink), ",")] = true
		}
	}
	if len(sinkSets) != 1<<len(optionalSink) || len(txSets) != 1<<len(optionalTx) {
		t.Fatalf("the fakes cover %d of the %d combinations of %v, and %d of the %d of %v: add the missing ones",
			len(sinkSets), 1<<len(optionalSink), optionalSink, len(txSets), 1<<len(optionalTx), optionalTx)
	}
	for ti := range len(fakeTxs(nil)) {
		for si := range len(fakeSinks(fakeSink{})) {
			log := &fakeLog{}
			tx := fakeTxs(log)[ti]
			s := fakeSinks(fakeSink{log: log, tx: tx})[si]
			name := fmt.Sprintf("a sink with %v and a Tx with %v", has(s, optionalSink), has(tx, optionalTx))
			w := ApplyTo(s, nil).(*applyDownstream).sink
			if got, want := has(w, optionalSink), has(s, optionalSink); !slices.Equal(got, want) {
				t.Errorf("%s: apply.Run is given a sink with %v", name, got)
			}
			// Each one kept answers as the sink's.
			if _, ok := s.(apply.TxLimiter); ok {
				if l, ok := w.(apply.TxLimiter); ok && l.MaxOpenTxs() != 3 {
					t.Errorf("%s: MaxOpenTxs %d, want the sink's 3", name, l.MaxOpenTxs())
				}
			}
			if _, ok := s.(apply.CommitOrderer); ok {
				if o, ok := w.(apply.CommitOrderer); ok && !o.NeedsCommitOrder() {
					t.Errorf("%s: NeedsCommitOrder false, want the sink's true", name)
				}
			}
			if _, ok := s.(apply.ConflictReporter); ok {
				if c, ok := w.(apply.ConflictReporter); ok && !reflect.DeepEqual(c.Conflicts(), apply.Conflicts{Replaced: 7, DeletesMissed: 8}) {
					t.Errorf("%s: Conflicts %+v, want the sink's", name, c.Conflicts())
				}
			}
			// DDLScoper: always there, answering as a sink without one.
			if sc, ok := w.(apply.DDLScoper); !ok {
				t.Errorf("%s: apply.Run is given a sink without DDLScoper", name)
			} else if tables, scoped, err := sc.DDLTables(ctx, &codec.DDL{}); err != nil || scoped || tables != nil {
				t.Errorf("%s: DDLTables %v, %v, %v: want the answer of a sink that cannot tell (ok false)", name, tables, scoped, err)
			}
			// EventDDLScoper: always there, answering false.
			if es, ok := w.(apply.EventDDLScoper); !ok {
				t.Errorf("%s: apply.Run is given a sink without EventDDLScoper", name)
			} else if es.ScopesFromEvent() {
				t.Errorf("%s: ScopesFromEvent true, want the answer of a sink without it (false)", name)
			}
			// CommitTsSplitter: always there, answering false.
			if sp, ok := w.(apply.CommitTsSplitter); !ok {
				t.Errorf("%s: apply.Run is given a sink without CommitTsSplitter", name)
			} else if sp.SplitsCommitTs() {
				t.Errorf("%s: SplitsCommitTs true, want the answer of a sink without it (false)", name)
			}
			// And no progress: none read, none recorded.
			if p, err := w.Progress(ctx); err != nil || len(p.Tables) != 0 || p.DDL != (apply.DDLMark{}) {
				t.Errorf("%s: Progress %+v, %v: want none", name, p, err)
			}
			if err := w.ApplyDDL(ctx, &codec.DDL{}, apply.DDLMark{CommitTs: 60, Count: 1}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(log.ddlMarks, []apply.DDLMark{{}}) {
				t.Errorf("%s: the sink recorded DDL marks %v, want none", name, log.ddlMarks)
			}
			wtx, err := w.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := has(wtx, optionalTx), has(tx, optionalTx); !slices.Equal(got, want) {
				t.Errorf("%s: apply.Run is given a Tx with %v", name, got)
			}
			if g, ok := wtx.(apply.GroupApplier); ok {
				if err := g.ApplyGroup(ctx, nil); err != nil || log.groups != 1 {
					t.Errorf("%s: ApplyGroup: %v, and the Tx's ran %d times, want once", name, err, log.groups)
				}
			}
			if d, ok := wtx.(apply.DDLTx); ok {
				if err := d.ApplyDDL(ctx, &codec.DDL{}, apply.DDLMark{CommitTs: 61, Count: 1}); err != nil || !slices.Equal(log.txDDLMarks, []apply.DDLMark{{}}) {
					t.Errorf("%s: a DDL in the Tx: %v, marks recorded %v, want it run once with none", name, err, log.txDDLMarks)
				}
			}
			if err := wtx.Commit(ctx, []apply.Mark{{Table: apply.Table{Schema: "db", Name: "t"}, CommitTs: 60}}); err != nil {
				t.Fatal(err)
			}
			if len(log.marks) != 1 || len(log.marks[0]) != 0 {
				t.Errorf("%s: the Tx committed marks %v, want none", name, log.marks)
			}
		}
	}
}

type scoper struct{}

func (scoper) DDLTables(context.Context, *codec.DDL) ([]apply.Table, bool, error) {
	return []apply.Table{{Schema: "db", Name: "t"}}, true, nil
}

// TestApplyToKeepsDDLScope: a sink that can tell which tables a DDL touches
// keeps saying so through ApplyTo's wrapper, so that apply.Run commits only
// the workers holding those tables' rows before it.
func TestApplyToKeepsDDLScope(t *testing.T) {
	s := struct {
		fakeSink
		scoper
	}{fakeSink{log: &fakeLog{}}, scoper{}}
	w := ApplyTo(s, nil).(*applyDownstream).sink
	sc, ok := w.(apply.DDLScoper)
	if !ok {
		t.Fatal("apply.Run is given a sink without DDLScoper")
	}
	tables, scoped, err := sc.DDLTables(context.Background(), &codec.DDL{})
	if err != nil || !scoped || !slices.Equal(tables, []apply.Table{{Schema: "db", Name: "t"}}) {
		t.Fatalf("DDLTables %v, %v, %v: want the sink's [db.t], true", tables, scoped, err)
	}
}

type eventScoper struct{ scoper }

func (eventScoper) ScopesFromEvent() bool { return true }

type splitter struct{}

func (splitter) SplitsCommitTs() bool { return true }

// TestApplyToKeepsYesAnswers: a one-writer sink that scopes a DDL from the
// event alone, or one that takes a commit ts in parts, keeps saying so
// through ApplyTo's wrapper, so that apply.Run holds the other tables' rows
// across a DDL, and passes a batch holding one large transaction in
// bounded memory.
func TestApplyToKeepsYesAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		sink apply.Sink
		says func(apply.Sink) bool
	}{
		{"EventDDLScoper", struct {
			fakeSink
			eventScoper
		}{fakeSink{log: &fakeLog{}}, eventScoper{}}, func(w apply.Sink) bool {
			es, ok := w.(apply.EventDDLScoper)
			return ok && es.ScopesFromEvent()
		}},
		{"CommitTsSplitter", struct {
			fakeSink
			splitter
		}{fakeSink{log: &fakeLog{}}, splitter{}}, func(w apply.Sink) bool {
			sp, ok := w.(apply.CommitTsSplitter)
			return ok && sp.SplitsCommitTs()
		}},
	} {
		if w := ApplyTo(c.sink, nil).(*applyDownstream).sink; !c.says(w) {
			t.Errorf("apply.Run is given a sink answering no as a %s, over one answering yes", c.name)
		}
	}
}
