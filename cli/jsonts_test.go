package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"
)

// tsoResolved is the global resolved ts of writeTSOLog's logs: a TiDB-like
// TSO above 2^53 whose low bits a double cannot hold (it rounds to
// 463000000000000768), as the TSOs of a real log.
const tsoResolved = uint64(463000000000000777)

// tsoAt is the commit ts of event i of n (1 ≤ i ≤ n): one a millisecond, the
// last at tsoResolved.
func tsoAt(i, n int) uint64 { return tsoResolved - uint64(n-i)<<18 }

// tsoLog is a log writeTSOLog wrote.
type tsoLog struct {
	dir   string // --storage
	id    string // --log
	start uint64 // its checkpoint: below the first event
	log   *redokit.Log
	coord *meta.Coordinator
}

// writeTSOLog writes log id on local disk under dir through one real writer,
// w1, with one span: a CREATE TABLE db.t1 at the first ts, then one row a
// ts, n events in all, up to tsoResolved, the global resolved ts. With
// seal, the writer is closed (segments of about 4 KiB, every one sealed);
// without, it is left open, as after a SIGKILL: one active segment of many
// 1 KiB blocks.
func writeTSOLog(t *testing.T, dir, id string, n int, seal bool) *tsoLog {
	t.Helper()
	ctx := context.Background()
	b, err := blob.Open(ctx, withCreateDir(fileURL(dir)))
	flipMust(t, err)
	t.Cleanup(func() { b.Close() })
	log, err := redokit.Open(ctx, b, id)
	flipMust(t, err)
	start := tsoAt(0, n) - 1
	coord, err := log.OpenCoordinator(ctx, &meta.CoordinatorOptions{StartTs: start})
	flipMust(t, err)
	flipMust(t, coord.AddWriter(ctx, "w1"))
	flipMust(t, coord.AddSpan(ctx, 1, start))
	segBytes := int64(4 << 10)
	if !seal {
		segBytes = 1 << 30
	}
	w, err := log.OpenWriter(ctx, "w1", &writer.Options{FlushInterval: time.Hour, PublishInterval: time.Hour,
		MaxSegmentBytes: segBytes, BlockSize: 1 << 10})
	flipMust(t, err)
	if !seal {
		// Never closed while the test runs, as after a SIGKILL.
		t.Cleanup(func() { _ = w.Close(context.Background()) })
	}
	flipMust(t, w.AddSpan(1, start))
	r := rand.New(rand.NewPCG(uint64(n), 29))
	for i := 1; i <= n; i++ {
		ts := tsoAt(i, n)
		ev := codec.Event{Kind: codec.RowEvent, Row: codec.RowChange{
			StartTs: ts - 1, CommitTs: ts, Table: codec.TableName{Schema: "db", Name: "t1"},
			Columns: []codec.Column{
				{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(int64(i))},
				{Name: "v", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Value: codec.StringValue(randText(r))},
			},
		}}
		if i == 1 {
			ev = codec.Event{Kind: codec.DDLEvent, DDL: codec.DDL{StartTs: ts - 1, CommitTs: ts,
				Table: codec.TableName{Schema: "db", Name: "t1"}, Tables: []codec.DDLTable{{TableName: codec.TableName{Schema: "db", Name: "t1"}}},
				Type: codec.ActionCreateTable, Query: "CREATE TABLE db.t1 (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(200))"}}
		}
		flipMust(t, w.Write(ctx, 1, ev))
		flipMust(t, w.AdvanceResolved(1, ts))
		if i%10 == 0 || i == n {
			_, err := w.Flush(ctx)
			flipMust(t, err)
		}
	}
	if seal {
		flipMust(t, w.Close(ctx))
	} else {
		_, err := w.Publish(ctx)
		flipMust(t, err)
	}
	m, err := coord.Tick(ctx)
	flipMust(t, err)
	if m.ResolvedTs != tsoResolved || m.CheckpointTs != start {
		t.Fatalf("the log's checkpoint and resolved ts are %d and %d, want %d and %d", m.CheckpointTs, m.ResolvedTs, start, tsoResolved)
	}
	return &tsoLog{dir: dir, id: id, start: start, log: log, coord: coord}
}

// randText is 60 to 160 letters: rows that lz4 barely shrinks, so that the
// blocks are many.
func randText(r *rand.Rand) string {
	b := make([]byte, 60+r.IntN(100))
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

// args is the command line of a command on l: the command, then --storage
// and --log.
func (l *tsoLog) args(cmd ...string) []string {
	return append(cmd, "--storage", l.dir, "--log", l.id)
}

// checkpointTs reads the log's checkpoint from its meta object.
func (l *tsoLog) checkpointTs(t *testing.T) uint64 {
	t.Helper()
	m, err := l.log.Meta(context.Background())
	flipMust(t, err)
	return m.CheckpointTs
}

// runJQ runs the jq binary at path with args on input and returns its
// output without the final newline.
func runJQ(t *testing.T, path, input string, args ...string) string {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Stdin = strings.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jq %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSuffix(string(out), "\n")
}

// lagExpr is OPERATIONS.md's jq expression of the checkpoint's lag in
// seconds (TestJSONTsThroughJQ checks that the document has it).
const lagExpr = `((.resolved_ts | tonumber) - (.checkpoint_ts | tonumber)) / 262144000`

// TestJSONTsThroughJQ passes a ts through the real jq, as OPERATIONS.md
// tells an operator to: `redokit meta --json | jq -r .resolved_ts` fed to
// `redokit checkpoint set` sets exactly the resolved ts. As a JSON number
// (before issue 29) jq 1.6 read it as a double and printed
// 463000000000000800: refused, 23 ticks above the resolved ts (another ts
// comes out below itself, and the checkpoint is set short, silently). jq is
// needed: outside CI the test skips without it, saying so; under CI it
// fails (scripts/test.sh installs it).
func TestJSONTsThroughJQ(t *testing.T) {
	jq, err := exec.LookPath("jq")
	if err != nil {
		reason := "jq is not installed (apt-get install jq): the round trip of a ts through jq cannot be checked"
		if testenv.InCI() {
			t.Fatalf("%s (CI is set: scripts/test.sh installs jq; this test must run)", reason)
		}
		t.Skip("skipping: " + reason)
	}
	if uint64(float64(tsoResolved)) == tsoResolved {
		t.Fatalf("%d fits a double: the test would prove nothing", tsoResolved)
	}
	l := writeTSOLog(t, t.TempDir(), "big", 40, true)
	r := cli(t, l.args("meta", "--json")...)
	wantCode(t, r, 0)

	bare := runJQ(t, jq, r.stdout, "-r", ".resolved_ts")
	set := cli(t, l.args("checkpoint", "set", bare, "--yes", "--json")...)
	if cp := l.checkpointTs(t); set.code != 0 || cp != tsoResolved {
		t.Fatalf("checkpoint set $(redokit meta --json | jq -r .resolved_ts): jq printed %s, the checkpoint is %d, want %d exactly:\n%s",
			bare, cp, tsoResolved, set)
	}
	if got := runJQ(t, jq, set.stdout, "-r", ".checkpoint_ts"); got != fmt.Sprint(tsoResolved) {
		t.Fatalf("checkpoint set --json | jq -r .checkpoint_ts printed %s, want %d", got, tsoResolved)
	}

	// jq without -r prints the string with its quotes: refused as a ts,
	// loudly (exit 2), never rounded.
	quoted := runJQ(t, jq, r.stdout, ".resolved_ts")
	if want := strconv.Quote(fmt.Sprint(tsoResolved)); quoted != want {
		t.Fatalf("jq .resolved_ts printed %s, want %s", quoted, want)
	}
	wantCode(t, cli(t, l.args("checkpoint", "set", quoted, "--yes")...), 2)

	// OPERATIONS.md's lag in seconds: the strings through tonumber (a
	// double: a few ticks off, which an age in seconds does not notice).
	doc, err := os.ReadFile(filepath.Join("..", "docs", "OPERATIONS.md"))
	flipMust(t, err)
	if !strings.Contains(string(doc), lagExpr) {
		t.Fatalf("docs/OPERATIONS.md does not give the lag as %q", lagExpr)
	}
	lag, err := strconv.ParseFloat(runJQ(t, jq, r.stdout, lagExpr), 64)
	flipMust(t, err)
	if want := float64(tsoResolved-l.start) / 262144000; math.Abs(lag-want) > 1e-6 {
		t.Fatalf("jq %q printed %v, want %v", lagExpr, lag, want)
	}
}

// maxExact is the largest integer every integer up to which a double holds.
const maxExact = 1 << 53

// checkTsStrings fails when the JSON document doc holds a number above 2^53
// (a ts a double rounds), or a ts field that is not a string: a key ending
// in "_ts" or holding "_ts_", "from" (checkpoint set's), "seed" (demo's and
// torture's), and the values of a "spans" object (meta's span → ts map). It returns how many ts strings it
// saw.
func checkTsStrings(t *testing.T, what, doc string) int {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(doc)) // no UseNumber: numbers are float64, as jq reads them
	n := 0
	for dec.More() {
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: not JSON (%v):\n%s", what, err, doc)
		}
		n += walkTs(t, what, "", false, v)
	}
	return n
}

func walkTs(t *testing.T, what, path string, isTs bool, v any) int {
	t.Helper()
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			_, isMap := x[k].(map[string]any)
			// A seed is no ts, but it is a uint64 that --seed takes back,
			// above 2^53 when random: a string too.
			ts := strings.HasSuffix(k, "_ts") || strings.Contains(k, "_ts_") || k == "from" || k == "seed"
			if k == "spans" && isMap {
				for sk, sv := range x[k].(map[string]any) {
					n += walkTs(t, what, path+".spans."+sk, true, sv)
				}
				continue
			}
			n += walkTs(t, what, path+"."+k, ts, x[k])
		}
	case []any:
		for i, e := range x {
			n += walkTs(t, what, fmt.Sprintf("%s[%d]", path, i), isTs, e)
		}
	case float64:
		if x > maxExact || x < -maxExact {
			t.Errorf("%s: %s is the number %v, above 2^53: a double (jq) rounds it; a ts must be a string", what, path, x)
		} else if isTs {
			t.Errorf("%s: the ts %s is a number (%v), not a string", what, path, x)
		}
	case string:
		if isTs {
			if _, err := strconv.ParseUint(x, 10, 64); err != nil {
				t.Errorf("%s: the ts %s is %q, not a string of digits", what, path, x)
			}
			n++
		}
	default:
		if isTs && x != nil {
			t.Errorf("%s: the ts %s is %v (%T), not a string", what, path, x, x)
		}
	}
	return n
}

// TestJSONTsAreStrings runs every command that prints a ts in JSON, on logs
// whose ts are TSOs above 2^53, and holds every document to checkTsStrings:
// no number above 2^53 anywhere, every ts a string of digits.
func TestJSONTsAreStrings(t *testing.T) {
	ctx := context.Background()
	l := writeTSOLog(t, t.TempDir(), "strings", 120, true)
	// A DDL barrier and a writer fenced once, so that meta has every kind
	// of ts it prints.
	flipMust(t, l.coord.AddBarrier(ctx, "ddl-1", tsoResolved+1<<18))
	sink := "sqlite://" + filepath.Join(t.TempDir(), "down.db")
	mid := fmt.Sprint(tsoAt(60, 120))

	type run struct {
		name string
		args []string
		code int
	}
	runs := []run{
		{"meta", l.args("meta", "--json"), 0},
		{"writer ls", l.args("writer", "ls", "--json"), 0},
		{"ls", l.args("ls", "--json"), 0},
		{"verify", l.args("verify", "--json"), 0},
		{"dump", l.args("dump"), 0},
		{"apply", l.args("apply", "--sink", sink, "--end-ts", mid, "--json"), 0},
		{"writer fence", l.args("writer", "fence", "w1", "--json"), 0},
		{"meta after the fence", l.args("meta", "--json"), 0},
		{"checkpoint set", l.args("checkpoint", "set", mid, "--yes", "--json"), 0},
		{"gc --dry-run", l.args("gc", "--dry-run", "--json"), 0},
		{"gc", l.args("gc", "--yes", "--json"), 0},
		{"apply the rest", l.args("apply", "--sink", sink, "--json"), 0},
		{"writer rm", l.args("writer", "rm", "w1", "--yes", "--force", "--json"), 0},
		{"gen", []string{"gen", "--storage", memName(t), "--log", "g", "--rows", "300", "--json"}, 0},
		{"demo", []string{"demo", "--storage", memName(t), "--dir", t.TempDir(), "--rows", "1500", "--writers", "2", "--json"}, 0},
		// A seed above 2^53 (a random one is, most of the time): --seed
		// must get back what --json printed.
		{"torture", []string{"torture", "--storage", memName(t), "--duration", "1s", "--seed", fmt.Sprint(bigSeed), "--json"}, 0},
	}
	seen := map[string]int{}
	for _, rn := range runs {
		r := cli(t, rn.args...)
		wantCode(t, r, rn.code)
		seen[rn.name] = checkTsStrings(t, rn.name, r.stdout)
	}
	// Each document had ts to check (a test that checks none proves
	// nothing).
	for _, rn := range runs {
		if seen[rn.name] == 0 {
			t.Errorf("%s printed no ts string", rn.name)
		}
	}
	// The kinds of ts meta prints beside the top-level ones.
	r := cli(t, l.args("meta", "--json")...)
	var m struct {
		Spans    map[string]string `json:"spans"`
		Barriers []struct {
			CommitTs string `json:"commit_ts"`
		} `json:"barriers"`
		Writers []struct {
			Fences []struct {
				MaxTs       string `json:"max_ts"`
				CommittedTs string `json:"committed_ts"`
			} `json:"fences"`
		} `json:"writers"`
	}
	decodeJSON(t, r.stdout, &m)
	if len(m.Spans) == 0 || len(m.Barriers) != 1 || m.Barriers[0].CommitTs != fmt.Sprint(tsoResolved+1<<18) ||
		len(m.Writers) != 1 || len(m.Writers[0].Fences) != 1 || m.Writers[0].Fences[0].MaxTs != fmt.Sprint(tsoResolved) {
		t.Fatalf("meta --json lacks the spans, the barrier or the fence:\n%s", r.stdout)
	}
}

// bigSeed is torture's seed in TestJSONTsAreStrings: above 2^53, where a
// double rounds it (to 9007199254740992).
const bigSeed = uint64(1)<<53 + 1

// TestTortureJSONSeedAndTs: torture --json prints its seed and final ts as
// strings of every digit (before issue 29 they were numbers, and the seed a
// script passed back through jq to replay a run was another seed).
func TestTortureJSONSeedAndTs(t *testing.T) {
	if uint64(float64(bigSeed)) == bigSeed {
		t.Fatalf("%d fits a double: the test would prove nothing", bigSeed)
	}
	r := cli(t, "torture", "--storage", memName(t), "--duration", "1s", "--seed", fmt.Sprint(bigSeed), "--json")
	wantCode(t, r, 0)
	var v struct {
		Seed            string `json:"seed"`
		FinalCheckpoint string `json:"final_checkpoint_ts"`
		FinalResolved   string `json:"final_resolved_ts"`
	}
	decodeJSON(t, r.stdout, &v)
	if v.Seed != fmt.Sprint(bigSeed) {
		t.Errorf("seed %q, want %d", v.Seed, bigSeed)
	}
	cp, err1 := strconv.ParseUint(v.FinalCheckpoint, 10, 64)
	rs, err2 := strconv.ParseUint(v.FinalResolved, 10, 64)
	if err1 != nil || err2 != nil || cp == 0 || cp > rs {
		t.Errorf("final_checkpoint_ts %q, final_resolved_ts %q: want strings of digits, 0 < checkpoint ≤ resolved\n%s", v.FinalCheckpoint, v.FinalResolved, r.stdout)
	}
}

// TestJSONTwinsKeepEveryField: the CLI's twins of the on-disk types print
// every field of theirs, under the same name (a field added to meta.Fence
// must be added to fenceJSON, as a string if it is a ts).
func TestJSONTwinsKeepEveryField(t *testing.T) {
	names := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
		return out
	}
	for _, pair := range []struct{ disk, cli any }{{meta.Fence{}, fenceJSON{}}, {meta.Barrier{}, barrierJSON{}}} {
		if d, c := names(pair.disk), names(pair.cli); !slices.Equal(d, c) {
			t.Errorf("%T has the JSON fields %v, its CLI twin %T %v", pair.disk, d, pair.cli, c)
		}
	}
}
