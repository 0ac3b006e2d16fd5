package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/workload"
)

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown command", []string{"frobnicate"}, []string{`unknown command "frobnicate"`, "--help"}},
		{"unknown flag", []string{"meta", "--storage", "mem://", "--log", "x", "--bogus"}, []string{"unknown flag: --bogus"}},
		{"missing storage", []string{"meta", "--log", "x"}, []string{"needs --storage"}},
		{"missing log", []string{"ls", "--storage", "mem://"}, []string{"needs --log"}},
		{"bad log id", []string{"meta", "--storage", "mem://", "--log", "a/b"}, []string{`--log "a/b"`}},
		{"unknown scheme", []string{"meta", "--storage", "nosuch://bucket/x", "--log", "x"}, []string{`unknown scheme "nosuch"`, "file", "s3", "gs", "azblob", "mem"}},
		{"extra argument", []string{"verify", "--storage", "mem://", "--log", "x", "extra"}, []string{`unknown command "extra"`}},
		{"bad flag value", []string{"gen", "--storage", "mem://", "--log", "x", "--rows", "many"}, []string{"--rows"}},
		{"bad rows", []string{"gen", "--storage", "mem://", "--log", "x", "--rows", "0"}, []string{"--rows must be at least 1"}},
		{"apply without sink", []string{"apply", "--storage", "mem://", "--log", "x"}, []string{"needs --sink"}},
		{"bad table filter", []string{"dump", "--storage", "mem://", "--log", "x", "--table", "t1"}, []string{`--table`, `table pattern "t1"`, "schema.table"}},
		{"bad table filter for apply too", []string{"apply", "--storage", "mem://", "--log", "x", "--sink", "sqlite:///nonexistent/x.db", "--table", "t1"}, []string{`--table`, `table pattern "t1"`, "schema.table"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, c.args...)
			wantCode(t, r, 2)
			mustContain(t, "stderr", r.stderr, c.want...)
			if r.stdout != "" {
				t.Fatalf("a usage error printed to stdout:\n%s", r)
			}
		})
	}
}

func TestHelpAndNoArgs(t *testing.T) {
	r := cli(t)
	wantCode(t, r, 0)
	mustContain(t, "help", r.stdout, "demo", "verify", "apply", "check", "Exit codes")
	r = cli(t, "apply", "--help")
	wantCode(t, r, 0)
	mustContain(t, "apply help", r.stdout, "--sink", "--start-ts", "--end-ts", "--force")
}

func TestMissingDirAndLog(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such", "dir")
	r := cli(t, "meta", "--storage", fileURL(missing), "--log", "x")
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, missing)

	// A plain path is a local directory too.
	r = cli(t, "ls", "--storage", missing, "--log", "x")
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, missing)

	empty := t.TempDir()
	r = cli(t, "meta", "--storage", empty, "--log", "nolog")
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, `no log "nolog"`, "nolog/meta")
}

func TestGenMetaLsDumpVerify(t *testing.T) {
	dir := t.TempDir()
	genLog(t, dir, "cf1", "--writers", "2")

	r := cli(t, "meta", "--storage", dir, "--log", "cf1")
	wantCode(t, r, 0)
	mustContain(t, "meta", r.stdout, "checkpoint ts", "global resolved ts", "w1", "w2", "EPOCH", "FLUSHED TS")
	if r.stderr != "" {
		t.Fatalf("meta wrote to stderr (a progress bar off a terminal?):\n%s", r)
	}
	var info struct {
		CheckpointTs uint64 `json:"checkpoint_ts,string"`
		ResolvedTs   uint64 `json:"resolved_ts,string"`
		Writers      []struct {
			Writer    string `json:"writer"`
			Live      bool   `json:"live"`
			Epoch     uint64 `json:"epoch"`
			FlushedTs uint64 `json:"flushed_ts,string"`
		} `json:"writers"`
	}
	r = cli(t, "meta", "--storage", dir, "--log", "cf1", "--json")
	wantCode(t, r, 0)
	decodeJSON(t, r.stdout, &info)
	if len(info.Writers) != 2 || info.ResolvedTs <= info.CheckpointTs {
		t.Fatalf("meta --json: %+v", info)
	}
	for _, w := range info.Writers {
		// gen released its writers when it ended: none is live.
		if w.Live || w.Epoch != 1 || w.FlushedTs != info.ResolvedTs {
			t.Fatalf("writer %+v after a clean gen, resolved %d", w, info.ResolvedTs)
		}
	}

	r = cli(t, "ls", "--storage", dir, "--log", "cf1", "--json")
	wantCode(t, r, 0)
	var ls struct {
		Segments []segInfo `json:"segments"`
		Summary  segSum    `json:"summary"`
	}
	decodeJSON(t, r.stdout, &ls)
	if ls.Summary.Segments < 2 || ls.Summary.Sealed != ls.Summary.Segments || ls.Summary.Writers != 2 {
		t.Fatalf("ls summary %+v", ls.Summary)
	}
	for _, s := range ls.Segments {
		if s.Writer == "" || s.Seq == 0 || s.MinTs > s.MaxTs || s.Size <= 0 {
			t.Fatalf("segment %+v", s)
		}
	}
	r = cli(t, "ls", "--storage", dir, "--log", "cf1", "--writer", "w2")
	wantCode(t, r, 0)
	mustContain(t, "ls", r.stdout, "WRITER", "sealed", "cf1/seg/w2/")
	if strings.Contains(r.stdout, "cf1/seg/w1/") {
		t.Fatalf("--writer w2 listed w1:\n%s", r.stdout)
	}

	// dump: JSON lines in commit-ts order, the table filter honoured.
	r = cli(t, "dump", "--storage", dir, "--log", "cf1", "--table", "demo.t2")
	wantCode(t, r, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 10 {
		t.Fatalf("dump printed %d lines", len(lines))
	}
	prev := uint64(0)
	ops := map[string]int{}
	for _, l := range lines {
		var ev struct {
			CommitTs uint64         `json:"commit_ts,string"`
			Op       string         `json:"op"`
			Table    string         `json:"table"`
			Columns  map[string]any `json:"columns"`
			Old      map[string]any `json:"old"`
			Segment  string         `json:"segment"`
		}
		decodeJSON(t, l, &ev)
		if ev.Table != "demo.t2" {
			t.Fatalf("--table demo.t2 printed %s", l)
		}
		if ev.CommitTs < prev {
			t.Fatalf("out of order: %d after %d", ev.CommitTs, prev)
		}
		prev = ev.CommitTs
		ops[ev.Op]++
		if !strings.HasPrefix(ev.Segment, "cf1/seg/") {
			t.Fatalf("event without its segment: %s", l)
		}
		if ev.Op == "insert" && (ev.Columns["id"] == nil || ev.Old != nil) {
			t.Fatalf("insert %s", l)
		}
	}
	if ops["insert"] == 0 || ops["update"] == 0 || ops["delete"] == 0 || ops["ddl"] == 0 {
		t.Fatalf("dump of demo.t2 has ops %v", ops)
	}
	r = cli(t, "dump", "--storage", dir, "--log", "cf1", "--limit", "5")
	wantCode(t, r, 0)
	if n := strings.Count(r.stdout, "\n"); n != 5 {
		t.Fatalf("--limit 5 printed %d lines", n)
	}

	r = cli(t, "verify", "--storage", dir, "--log", "cf1")
	wantCode(t, r, 0)
	mustContain(t, "verify", r.stdout, "OK: no errors")
}

func TestRangeFlags(t *testing.T) {
	store := memName(t)
	genLog(t, store, "r")
	r := cli(t, "meta", "--storage", store, "--log", "r", "--json")
	wantCode(t, r, 0)
	var m struct {
		CheckpointTs uint64 `json:"checkpoint_ts,string"`
		ResolvedTs   uint64 `json:"resolved_ts,string"`
	}
	decodeJSON(t, r.stdout, &m)
	sink := "sqlite://" + filepath.Join(t.TempDir(), "r.db")
	above := fmt.Sprint(m.ResolvedTs + 1)
	resolved := fmt.Sprint(m.ResolvedTs)

	for _, cmd := range []string{"apply", "dump"} {
		args := []string{cmd, "--storage", store, "--log", "r"}
		if cmd == "apply" {
			args = append(args, "--sink", sink)
		}
		// --start-ts above the resolved ts: an error naming both.
		r = cli(t, append(args, "--start-ts", above)...)
		wantCode(t, r, 1)
		mustContain(t, cmd+" stderr", r.stderr, "--start-ts "+above, "global resolved ts "+resolved)
		// --end-ts above the resolved ts: an error naming both, unless --force.
		r = cli(t, append(args, "--end-ts", above)...)
		wantCode(t, r, 1)
		mustContain(t, cmd+" stderr", r.stderr, "--end-ts "+above, "global resolved ts "+resolved, "--force")
		// start ≥ end given together is a usage error.
		r = cli(t, append(args, "--start-ts", "10", "--end-ts", "10")...)
		wantCode(t, r, 2)
	}
	// --force passes the global resolved ts, not what the log proves: the
	// writers published nothing above it, so the read is refused, naming
	// the bound, instead of returning what the listing happens to show.
	r = cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink, "--end-ts", above, "--force")
	wantCode(t, r, 1)
	mustContain(t, "apply --force stderr", r.stderr, "above what the log proves complete", "end ts "+above, "above "+resolved)
	r = cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink, "--end-ts", resolved, "--force")
	wantCode(t, r, 0)
	mustContain(t, "apply", r.stdout, "applied the redo log successfully", "(1500 rows")
}

func TestApply(t *testing.T) {
	store := memName(t)
	genLog(t, store, "a")
	db := filepath.Join(t.TempDir(), "down.db")
	r := cli(t, "apply", "--storage", store, "--log", "a", "--sink", "sqlite://"+db, "--json")
	wantCode(t, r, 0)
	var sum applySummary
	decodeJSON(t, r.stdout, &sum)
	if sum.Rows != 1500 || sum.DDLs == 0 || sum.Skipped != 0 {
		t.Fatalf("apply summary %+v", sum)
	}
	// Again: everything is already there, so everything is skipped.
	r = cli(t, "apply", "--storage", store, "--log", "a", "--sink", "sqlite://"+db, "--json")
	wantCode(t, r, 0)
	decodeJSON(t, r.stdout, &sum)
	if sum.Rows != 0 || sum.Skipped != sum.Events {
		t.Fatalf("second apply %+v", sum)
	}
}

func TestBadSinkURI(t *testing.T) {
	store := memName(t)
	genLog(t, store, "s")
	for _, sink := range []string{"oracle://admin:hunter2secret@db.example/app", "mysql://admin:hunter2secret@host:notaport/app", "sqlite:"} {
		r := cli(t, "apply", "--storage", store, "--log", "s", "--sink", sink)
		wantCode(t, r, 2)
		mustContain(t, "stderr", r.stderr, "--sink", "bad sink URI")
		if strings.Contains(r.stderr+r.stdout, "hunter2secret") {
			t.Fatalf("the sink password was printed:\n%s", r)
		}
	}
}

func TestStoragePasswordNeverPrinted(t *testing.T) {
	r := cli(t, "meta", "--storage", "s3://bucket/x?secret_key=topsecretvalue&bogus=1", "--log", "x")
	if r.code == 0 || strings.Contains(r.stdout+r.stderr, "topsecretvalue") {
		t.Fatalf("a secret was printed or the bad URL accepted:\n%s", r)
	}
}

func TestCorruptSegment(t *testing.T) {
	dir := t.TempDir()
	genLog(t, dir, "c", "--writers", "1")
	files := segmentFiles(t, dir)
	if len(files) < 2 {
		t.Fatalf("want several segments, got %v", files)
	}
	victim := files[len(files)/2]
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	// A byte inside the first block's payload (after the segment header
	// and the 40-byte block header): its CRC no longer holds.
	const off = segment.HeaderSize + segment.BlockHeaderSize + 100
	data[off] ^= 0xff
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	key, err := filepath.Rel(dir, victim)
	if err != nil {
		t.Fatal(err)
	}

	r := cli(t, "verify", "--storage", dir, "--log", "c")
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "corrupt", key, fmt.Sprintf(" %d ", segment.HeaderSize), "FAILED")
	r = cli(t, "verify", "--storage", dir, "--log", "c", "--json")
	wantCode(t, r, 1)
	var rep struct {
		OK       bool          `json:"ok"`
		Problems []problemJSON `json:"problems"`
	}
	decodeJSON(t, r.stdout, &rep)
	if rep.OK || len(rep.Problems) == 0 || rep.Problems[0].Key != key || rep.Problems[0].Offset != segment.HeaderSize {
		t.Fatalf("verify --json: %+v", rep)
	}

	r = cli(t, "apply", "--storage", dir, "--log", "c", "--sink", "sqlite://"+filepath.Join(t.TempDir(), "x.db"))
	wantCode(t, r, 1)
	mustContain(t, "apply stderr", r.stderr, key)
	r = cli(t, "dump", "--storage", dir, "--log", "c")
	wantCode(t, r, 1)
	mustContain(t, "dump stderr", r.stderr, key)
}

func TestVerifyFindsMetaProblems(t *testing.T) {
	store := memName(t)
	genLog(t, store, "m")
	b, err := blob.Open(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// A live writer whose state object is gone (gen released its writers:
	// w2 is made live again first).
	coord, err := meta.OpenCoordinator(context.Background(), b, "m", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.AddWriter(context.Background(), "w2"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(context.Background(), layout.WriterState("m", "w2")); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "verify", "--storage", store, "--log", "m")
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "meta", `live writer "w2"`, "m/writers/w2")
}

func TestGC(t *testing.T) {
	store := memName(t)
	genLog(t, store, "g")
	ctx := context.Background()
	b, err := blob.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := meta.OpenCoordinator(ctx, b, "g", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Meta()
	// The downstream applied everything: the checkpoint moves to the end.
	if err := c.SetCheckpoint(ctx, m.ResolvedTs); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		for _, err := range b.List(ctx, "g/seg/") {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		return n
	}
	before := count()

	r := cli(t, "gc", "--storage", store, "--log", "g", "--dry-run")
	wantCode(t, r, 0)
	mustContain(t, "gc --dry-run", r.stdout, "would delete", "g/seg/")
	if count() != before {
		t.Fatal("--dry-run deleted segments")
	}
	// Without --yes and without a terminal: refused, nothing deleted.
	r = cli(t, "gc", "--storage", store, "--log", "g")
	wantCode(t, r, 1)
	mustContain(t, "gc", r.stderr, "refusing", "--yes")
	if count() != before {
		t.Fatal("gc deleted without confirmation")
	}
	// At a prompt, anything but yes keeps everything.
	yes := true
	r = cliIn(t, "no\n", &yes, "gc", "--storage", store, "--log", "g")
	wantCode(t, r, 1)
	mustContain(t, "gc prompt", r.stderr, "[y/N]", "not confirmed")
	if count() != before {
		t.Fatal("gc deleted after a no")
	}
	r = cli(t, "gc", "--storage", store, "--log", "g", "--yes", "--json")
	wantCode(t, r, 0)
	var res struct {
		Deleted int `json:"deleted"`
	}
	decodeJSON(t, r.stdout, &res)
	if res.Deleted == 0 || count() != before-res.Deleted {
		t.Fatalf("gc deleted %d of %d, %d left", res.Deleted, before, count())
	}
}

func TestRm(t *testing.T) {
	store := memName(t)
	genLog(t, store, "doomed")

	r := cli(t, "rm", "--storage", store, "--log", "doomed", "--force")
	wantCode(t, r, 1)
	mustContain(t, "rm", r.stderr, "refusing to delete log doomed", "--yes")
	wantCode(t, cli(t, "meta", "--storage", store, "--log", "doomed"), 0)

	// A prompt that gets the wrong answer deletes nothing.
	yes := true
	r = cliIn(t, "doom\n", &yes, "rm", "--storage", store, "--log", "doomed", "--force")
	wantCode(t, r, 1)
	mustContain(t, "rm", r.stderr, "Type the log ID", "not confirmed")
	wantCode(t, cli(t, "meta", "--storage", store, "--log", "doomed"), 0)

	r = cliIn(t, "doomed\n", &yes, "rm", "--storage", store, "--log", "doomed", "--force")
	wantCode(t, r, 0)
	mustContain(t, "rm", r.stdout, "deleted log doomed")
	r = cli(t, "meta", "--storage", store, "--log", "doomed")
	wantCode(t, r, 1)
	r = cli(t, "rm", "--storage", store, "--log", "doomed", "--yes")
	wantCode(t, r, 1)
	mustContain(t, "rm", r.stderr, `no log "doomed"`)
}

func TestGenRefusesAnExistingLog(t *testing.T) {
	store := memName(t)
	genLog(t, store, "twice")
	r := cli(t, "gen", "--storage", store, "--log", "twice", "--rows", "10")
	wantCode(t, r, 1)
	mustContain(t, "gen", r.stderr, "already exists")
}

// checkRows decodes check's --json output and lists its rows' names.
func checkRows(t *testing.T, stdout string) (out struct {
	OK     bool          `json:"ok"`
	Checks []checkResult `json:"checks"`
}, ran []string) {
	t.Helper()
	decodeJSON(t, stdout, &out)
	for _, c := range out.Checks {
		ran = append(ran, c.Check)
	}
	return out, ran
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	t.Run("mem", func(t *testing.T) {
		store := memName(t)
		b, err := blob.Open(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.Put(ctx, "keep/me", []byte("precious"), nil); err != nil {
			t.Fatal(err)
		}
		r := cli(t, "check", "--storage", store, "--large-size", "1048576")
		wantCode(t, r, 0)
		for _, name := range []string{"Plain/RoundTrip", "Plain/RangedRead", "Plain/ListOrder", "Plain/ListWhileChanging", "Plain/ConditionalCreate",
			"Plain/CompareAndSwap", "Plain/BatchDelete", "Prefixed/Delete", "Prefixed/Isolation", "cleanup"} {
			mustContain(t, "check", r.stdout, name)
		}
		if strings.Contains(r.stdout, "FAIL") {
			t.Fatalf("a check failed on mem:\n%s", r)
		}
		mustContain(t, "check", r.stdout, "is fit to hold a redo log")
		// Nothing outside the scratch prefix was touched, and the prefix
		// is gone.
		var keys []string
		for a, err := range b.List(ctx, "") {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, a.Key)
		}
		if len(keys) != 1 || keys[0] != "keep/me" {
			t.Fatalf("after check the store holds %v", keys)
		}
		if got, _ := b.ReadAll(ctx, "keep/me"); string(got) != "precious" {
			t.Fatal("check changed an object outside its prefix")
		}
	})
	t.Run("local", func(t *testing.T) {
		dir := t.TempDir()
		r := cli(t, "check", "--storage", dir, "--large-size", "1048576", "--json")
		wantCode(t, r, 0)
		var out struct {
			OK     bool          `json:"ok"`
			Checks []checkResult `json:"checks"`
		}
		decodeJSON(t, r.stdout, &out)
		if !out.OK {
			t.Fatalf("check failed on local disk:\n%s", r)
		}
		appended := 0
		for _, c := range out.Checks {
			if strings.HasSuffix(c.Check, "/Append") {
				appended++
				if c.Result != "pass" || !strings.Contains(c.Detail, "subtests") {
					t.Fatalf("local disk can append, check says %+v", c)
				}
			}
		}
		if appended != 2 {
			t.Fatalf("check ran Append %d times, want under Plain and Prefixed:\n%s", appended, r.stdout)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != ".redokit" { // the backend's own directory
				t.Fatalf("check left %s behind", e.Name())
			}
		}
	})
	t.Run("redo", func(t *testing.T) {
		dir := t.TempDir()
		r := cli(t, "check", "--storage", dir, "--redo", "--run", "^(RoundTrip|ReadBack|Fencing|Faults|Network)$", "--json")
		wantCode(t, r, 0)
		out, ran := checkRows(t, r.stdout)
		want := "Plain/RoundTrip Prefixed/RoundTrip redo/Plain/ReadBack redo/Plain/Fencing redo/Plain/Faults " +
			"redo/Prefixed/ReadBack redo/Prefixed/Fencing redo/Prefixed/Faults redo/Network cleanup"
		if !out.OK || strings.Join(ran, " ") != want {
			t.Fatalf("check --redo: ok %v, ran\n%v\nwant\n%s", out.OK, ran, want)
		}
	})
	t.Run("broken", func(t *testing.T) {
		r := cli(t, "check", "--storage", "broken://", "--large-size", "1024")
		wantCode(t, r, 1)
		mustContain(t, "check", r.stdout, "Plain/ConditionalCreate", "FAIL", "exactly one", "NOT fit")
		// The rules the driver breaks fail, with why a log needs them; the
		// ones it keeps pass.
		row := func(name string) string {
			for _, l := range strings.Split(r.stdout, "\n") {
				if f := strings.Fields(l); len(f) > 1 && f[0] == name {
					return l
				}
			}
			t.Fatalf("no row %s:\n%s", name, r.stdout)
			return ""
		}
		for _, name := range []string{"Plain/ConditionalCreate", "Prefixed/ConditionalCreate"} {
			if l := row(name); !strings.Contains(l, "FAIL") || !strings.Contains(l, "exactly one create-if-absent winner") {
				t.Fatalf("%s did not fail with its reason: %s", name, l)
			}
		}
		for _, name := range []string{"Plain/RoundTrip", "Plain/ListOrder", "Plain/CompareAndSwap", "Prefixed/BatchDelete"} {
			if l := row(name); !strings.Contains(l, "PASS") {
				t.Fatalf("%s failed on a driver that keeps its rule: %s", name, l)
			}
		}
		mustContain(t, "check", r.stdout, "--- FAIL: Plain/ConditionalCreate/")
		// --run selects rules; the others do not run.
		r = cli(t, "check", "--storage", "broken://", "--run", "^(RoundTrip|CompareAndSwap)$", "--json")
		wantCode(t, r, 0)
		out, ran := checkRows(t, r.stdout)
		if want := "Plain/RoundTrip Plain/CompareAndSwap Prefixed/RoundTrip Prefixed/CompareAndSwap cleanup"; !out.OK || strings.Join(ran, " ") != want {
			t.Fatalf("--run: ok %v, ran %v, want %s", out.OK, ran, want)
		}
		// The cleanup ran although a check failed.
		b, err := blob.Open(ctx, "broken://")
		if err != nil {
			t.Fatal(err)
		}
		page, err := b.ListPage(ctx, "", blob.ListOptions{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Objects) > 0 {
			t.Fatalf("check left %s behind after a failure", page.Objects[0].Key)
		}
	})
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	r := cli(t, "demo", "--dir", dir, "--rows", "4000", "--ddl-rate", "0.02", "--seed", "3")
	wantCode(t, r, 0)
	mustContain(t, "demo", r.stdout, "[sink]", "[gc]", "[failover]", "[recover]", "[verify]", "identical", "PASS",
		"over as epoch 2", "duplicates dropped")
	if _, err := os.Stat(filepath.Join(dir, "replica.db")); err != nil {
		t.Fatal(err)
	}
	// The log it leaves is there to look at.
	store := filepath.Join(dir, "redo")
	r = cli(t, "meta", "--storage", store, "--log", "demo")
	wantCode(t, r, 0)
	mustContain(t, "meta", r.stdout, "e1≤") // w2's fence
	wantCode(t, cli(t, "verify", "--storage", store, "--log", "demo"), 0)

	// Again in the same directory: refused, nothing overwritten.
	r = cli(t, "demo", "--dir", dir, "--rows", "100")
	wantCode(t, r, 1)
	mustContain(t, "demo", r.stderr, "already exists")
}

func TestDemoOnMemJSON(t *testing.T) {
	r := cli(t, "demo", "--storage", memName(t), "--dir", t.TempDir(), "--rows", "3000", "--writers", "2", "--json")
	wantCode(t, r, 0)
	var rep demoReport
	decodeJSON(t, r.stdout, &rep)
	if !rep.OK || rep.Comparison.Differences != 0 || rep.Failover == nil || rep.Failover.NewEpoch != 2 ||
		rep.GC == nil || rep.Recovery == nil || rep.Rows != 3000 || rep.Resolved != rep.LastTs || rep.Written.ratio() <= 1 {
		b, _ := json.MarshalIndent(rep, "", "  ")
		t.Fatalf("demo report:\n%s", b)
	}
	// Every rewritten event the dead writer had made durable is in the log
	// twice, and the recovery dropped exactly those copies.
	if want := rep.Failover.Rewritten - rep.Failover.Lost; want == 0 || rep.Recovery.Duplicates != want {
		t.Fatalf("the failover rewrote %d events, %d of them durable before; the recovery dropped %d duplicates",
			rep.Failover.Rewritten, want, rep.Recovery.Duplicates)
	}
}

// TestDemoCatchesAWrongDownstream proves the demo's comparison can fail: a
// model of another workload must not match what was applied.
func TestDemoCatchesAWrongDownstream(t *testing.T) {
	dir := t.TempDir()
	wantCode(t, cli(t, "demo", "--dir", dir, "--rows", "1000", "--seed", "5"), 0)
	cfg := (&workloadFlags{rows: 1000, tables: 4, rowSize: 200, writers: 3, txnRows: 8, ddlRate: 0.005, seed: 6}).config()
	c, err := compareSQLite(context.Background(), filepath.Join(dir, "replica.db"), workload.Expected(cfg, math.MaxUint64))
	if err != nil {
		t.Fatal(err)
	}
	if c.Differences == 0 {
		t.Fatal("the comparison found no difference against another seed's model")
	}
}
