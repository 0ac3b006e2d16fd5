package sqlsink_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

// The apply's crash test: a child process applies a log into a downstream and
// is killed with SIGKILL at random moments (one to three times); a last run
// then completes it, and the downstream must end identical, row for row, to
// that of one uninterrupted run — on each sink. REDOKIT_APPLY_KILL_TRIALS sets
// the trials per sink (scripts/test.sh runs 20; plain `go test` 3).
//
// The log holds DDLs in its middle too (killDDLs), and every other trial
// kills its child the moment it reports a DDL begun: the child prints
// "ddl begin" and "ddl end" around each ApplyDDL, so the parent knows from
// the last line it got whether the child died inside one, and the test log
// counts those trials.

const killRows = 4000

// killOptions make many small transactions, so a kill lands between and
// inside commits alike.
var killOptions = apply.Options{TxnRows: 150, BatchRows: 40, RetryBackoff: time.Millisecond}

// killEvents is benchEvents with a keyless table beside it: rows that only a
// full-row match can delete, and that a replayed insert would double.
func killEvents(schema string) []*codec.Event {
	evs := benchEvents(schema, killRows)
	out := make([]*codec.Event, 0, len(evs)+len(evs)/4)
	var live [][]codec.Column
	rng := rand.New(rand.NewPCG(7, 7))
	for i, ev := range evs {
		out = append(out, ev)
		if ev.IsDDL() {
			if i+1 < len(evs) && !evs[i+1].IsDDL() || i+1 == len(evs) {
				out = append(out, ddlEv(ev.CommitTs(), schema, "audit", codec.ActionCreateTable,
					"CREATE TABLE audit (who VARCHAR(32), amount DOUBLE, doc JSON)"))
			}
			continue
		}
		if i+1 < len(evs) && evs[i+1].CommitTs() == ev.CommitTs() || rng.IntN(3) != 0 {
			continue // add at most one audit change per commit ts, after its rows
		}
		ts := ev.CommitTs()
		if len(live) > 4 && rng.IntN(4) == 0 {
			k := rng.IntN(len(live))
			out = append(out, rowEv(ts, schema, "audit", live[k], nil))
			live = slices.Delete(live, k, k+1)
			continue
		}
		img := []codec.Column{scol("who", fmt.Sprintf("u%d", rng.IntN(3))),
			{Name: "amount", Type: codec.TypeDouble, Flags: codec.FlagNullable, Value: codec.Float64Value(float64(rng.IntN(4)) / 10)},
			{Name: "doc", Type: codec.TypeJSON, Flags: codec.FlagNullable, Value: codec.JSONValue(fmt.Sprintf(`{"n": %d}`, rng.IntN(3)))}}
		live = append(live, img)
		out = append(out, rowEv(ts, schema, "audit", nil, img))
	}
	return withKillDDLs(schema, out)
}

// killDDLs are the DDLs in the middle of the kill log, each at the commit ts
// that ends the given share of its events (after that ts's rows): columns
// and indexes added to and dropped from tables that hold rows by then.
var killDDLs = []struct {
	at     float64
	table  string
	action codec.ActionType
	query  string
}{
	{0.2, "orders", codec.ActionAddColumn, "ALTER TABLE orders ADD COLUMN note VARCHAR(32)"},
	{0.4, "items", codec.ActionAddIndex, "CREATE INDEX ix_items_a ON items (a)"},
	{0.6, "users", codec.ActionAddColumn, "ALTER TABLE users ADD COLUMN flag BIGINT DEFAULT 7"},
	{0.8, "items", codec.ActionDropIndex, "DROP INDEX ix_items_a ON items"},
	{0.8, "events", codec.ActionAddIndex, "CREATE UNIQUE INDEX ux_events ON events (id, a)"},
	{0.9, "orders", codec.ActionDropColumn, "ALTER TABLE orders DROP COLUMN note"},
}

func withKillDDLs(schema string, evs []*codec.Event) []*codec.Event {
	out := make([]*codec.Event, 0, len(evs)+len(killDDLs))
	next := 0
	for i, ev := range evs {
		out = append(out, ev)
		last := i+1 == len(evs) || evs[i+1].CommitTs() != ev.CommitTs()
		for last && next < len(killDDLs) && float64(i+1) >= killDDLs[next].at*float64(len(evs)) {
			d := killDDLs[next]
			out = append(out, ddlEv(ev.CommitTs(), schema, d.table, d.action, d.query))
			next++
		}
	}
	return out
}

// ddlTracer is the child's sink: the SQL sink (every method and optional
// interface of it, embedded), printing "ddl begin" and "ddl end" around
// each DDL for the parent.
type ddlTracer struct{ *sqlsink.SQLSink }

func (s ddlTracer) ApplyDDL(ctx context.Context, ddl *codec.DDL, mark apply.DDLMark) error {
	return traceDDL(func() error { return s.SQLSink.ApplyDDL(ctx, ddl, mark) })
}

// Begin wraps a transaction that runs DDLs (apply.DDLTx: SQLite's), so
// that those print too. The wrapper hides the Tx's other optional
// interfaces, which the kill test's options (no foreign-key checks) never
// reach.
func (s ddlTracer) Begin(ctx context.Context) (apply.Tx, error) {
	tx, err := s.SQLSink.Begin(ctx)
	if d, ok := tx.(apply.DDLTx); ok && err == nil {
		return ddlTxTracer{tx, d}, nil
	}
	return tx, err
}

type ddlTxTracer struct {
	apply.Tx
	d apply.DDLTx
}

func (t ddlTxTracer) ApplyDDL(ctx context.Context, ddl *codec.DDL, mark apply.DDLMark) error {
	return traceDDL(func() error { return t.d.ApplyDDL(ctx, ddl, mark) })
}

func traceDDL(run func() error) error {
	fmt.Println("ddl begin")
	err := run()
	fmt.Println("ddl end")
	return err
}

// The child's side: started by runKillChild, the test binary applies
// killEvents into the sink its arguments name and exits, before any test
// runs.
func init() {
	testenv.RunChild("apply-kill", func(args []string) error {
		if len(args) != 4 {
			return fmt.Errorf("want the URI, the schema, the progress schema and the SplitBytes, got %q", args)
		}
		uri, schema, progress := args[0], args[1], args[2]
		split, err := strconv.ParseInt(args[3], 10, 64)
		if err != nil {
			return err
		}
		ctx := context.Background()
		s, err := apply.Open(ctx, uri, &apply.SinkOptions{ProgressSchema: progress})
		if err != nil {
			return err
		}
		defer s.Close()
		// The parent's clock starts here: a kill before the sink is open
		// would prove nothing.
		fmt.Println("applying")
		o := killOptions
		o.SplitBytes = split
		_, err = apply.Run(ctx, sliceSource(killEvents(schema)), ddlTracer{s.(*sqlsink.SQLSink)}, &o)
		if errors.Is(err, apply.ErrSplitTooLate) {
			// As its message says: the commit ts, whole.
			o.SplitBytes = 0
			_, err = apply.Run(ctx, sliceSource(killEvents(schema)), ddlTracer{s.(*sqlsink.SQLSink)}, &o)
		}
		return err
	})
}

func TestApplySurvivesSIGKILL(t *testing.T) {
	trials := testenv.Count(t, "REDOKIT_APPLY_KILL_TRIALS", 3)
	for _, d := range allDialects {
		t.Run(d.String(), func(t *testing.T) {
			ref := newEnv(t, d)
			evs := killEvents(ref.schema)
			start := time.Now()
			ref.run(evs, &killOptions)
			full := time.Since(start)
			tables := []string{"orders", "items", "users", "events", "audit"}
			want := ref.dumpAll(tables...)
			if len(want["audit"]) == 0 || len(want["orders"]) == 0 {
				t.Fatalf("the reference run left empty tables: %d audit, %d orders rows", len(want["audit"]), len(want["orders"]))
			}
			// The CREATE TABLEs that open the log come before the
			// DDLs of killDDLs: a kill at a DDL picks one of those.
			creates := slices.IndexFunc(evs, func(ev *codec.Event) bool { return !ev.IsDDL() })
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
			killed, inDDL := 0, 0
			for trial := range trials {
				// A subtest per trial: its downstream's connections close at
				// its end, not after every trial (50 trials held more than
				// MariaDB's and PostgreSQL's default connection limits).
				t.Run(fmt.Sprint("trial", trial), func(t *testing.T) {
					e := newEnv(t, d)
					// The events name their schema: the trial's downstream must
					// be applied under the reference's names to compare.
					kills := 1 + rng.IntN(3)
					hit, hitDDL := false, false
					for k := range kills {
						// The first kill lands early in the run (a child may run
						// faster than the in-process reference, warmed up);
						// the next ones anywhere in what is left, or after. In
						// every other trial the first kill comes the moment
						// the child begins a DDL, one of the log's at random
						// (a run resumed past it skips it: the kill then comes
						// at the delay).
						limit := full + full/4
						if k == 0 {
							limit = full / 4
						}
						delay := time.Duration(rng.Int64N(int64(limit) + 1))
						atDDL := 0
						if k == 0 && trial%2 == 1 {
							atDDL, delay = creates+1+rng.IntN(len(killDDLs)), full+full/4
						}
						// Every third trial's child hands its commit ts out
						// in parts of 4 KiB (apply.CommitTsSplitter).
						split := 0
						if trial%3 == 2 {
							split = 4 << 10
						}
						r, err := runKillChild(t, e, delay, atDDL, split)
						if err != nil {
							t.Fatalf("trial %d: child: %v", trial, err)
						}
						hit = hit || !r.done
						hitDDL = hitDDL || r.inDDL
					}
					if hit {
						killed++
					}
					if hitDDL {
						inDDL++
					}
					s := e.open(nil)
					if _, err := apply.Run(context.Background(), sliceSource(killEvents(e.schema)), s, &killOptions); err != nil {
						t.Fatalf("trial %d: the run after %d kills: %v", trial, kills, err)
					}
					got := e.dumpAll(tables...)
					for _, tb := range tables {
						if !slices.Equal(got[tb], want[tb]) {
							t.Errorf("trial %d (%d kills): table %s differs from the uninterrupted run: %d rows, want %d\n%s",
								trial, kills, tb, len(got[tb]), len(want[tb]), firstDiff(got[tb], want[tb]))
						}
					}
				})
			}
			t.Logf("%d trials, %d of them killed a child mid-apply, %d inside a DDL; an uninterrupted run takes %v", trials, killed, inDDL, full)
			if trials >= 10 && inDDL == 0 {
				// Half the trials kill at a DDL begun: none dying inside
				// one would leave the DDL's recovery untested.
				t.Errorf("none of %d trials killed a child inside a DDL", trials)
			}
			if killed < trials/2+1 {
				t.Errorf("only %d of %d trials killed a child before it finished: the trials proved little", killed, trials)
			}
		})
	}
}

// killRun is how a child ended: done (it finished before the kill), or
// killed, and then whether inside a DDL (its last line was "ddl begin").
type killRun struct{ done, inDDL bool }

// runKillChild runs the child applying into e's downstream, with
// SplitBytes split (0: the default), and kills it after delay, or when it
// begins its atDDL-th DDL (1-based; 0: never).
func runKillChild(t *testing.T, e *env, delay time.Duration, atDDL, split int) (killRun, error) {
	t.Helper()
	progress := ""
	if e.dialect == sqlsink.Postgres {
		progress = e.schema
	}
	c := testenv.StartChild(t, "apply-kill", []string{e.uri, e.schema, progress, strconv.Itoa(split)})
	if line, ok := <-c.Lines; !ok || line != "applying" {
		// The child failed before it opened the sink: Wait says why.
		if err := c.Wait(); err != nil {
			return killRun{done: true}, fmt.Errorf("%v: %s", err, c.Stderr())
		}
		return killRun{done: true}, nil
	}
	var killedAt atomic.Bool
	kill := func() {
		killedAt.Store(true)
		_ = c.Kill()
	}
	timer := time.AfterFunc(delay, kill)
	// Every line until the child is gone: the last one says where it
	// died. Wait drains Lines too, so it waits for this.
	var inDDL bool
	read := make(chan struct{})
	go func() {
		defer close(read)
		n := 0
		for line := range c.Lines {
			switch line {
			case "ddl begin":
				inDDL = true
				if n++; n == atDDL {
					kill()
				}
			case "ddl end":
				inDDL = false
			}
		}
	}()
	<-read
	err := c.Wait()
	timer.Stop()
	if killedAt.Load() {
		return killRun{inDDL: inDDL}, nil
	}
	if err != nil {
		return killRun{done: true}, fmt.Errorf("%v: %s", err, c.Stderr())
	}
	return killRun{done: true}, nil
}

// firstDiff shows the first rows where two sorted dumps part.
func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("first difference at row %d: got %q, want %q", i, g, w)
		}
	}
	return ""
}
