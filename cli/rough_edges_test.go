//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
)

// The tests of this file are the command line as a new user found it
// (issue 16): each one failed before its fix.

// jsonError is the object a failure prints on stdout with --json.
type jsonError struct {
	Error    string `json:"error"`
	ExitCode int    `json:"exit_code"`
}

// TestExitCodes: a mistake in the command line is 2 whatever part of it is
// wrong, a failure is 1 whatever command meets it, and a missing log is a
// failure for every command that reads one.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	usage := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown query parameter", []string{"ls", "--storage", fileURL(dir) + "?bogus=1", "--log", "x"}, []string{"bogus", "create_dir"}},
		{"unknown query parameter, gcs", []string{"ls", "--storage", "gs://bucket/x?bogus=1", "--log", "x"}, []string{"bogus", "chunk_size"}},
		{"unknown query parameter, azure", []string{"ls", "--storage", "azblob://container/x?bogus=1", "--log", "x"}, []string{"bogus", "block_size"}},
		{"negative workers", []string{"apply", "--storage", dir, "--log", "x", "--sink", "sqlite:///tmp/x.db", "--workers", "-1"}, []string{"--workers -1"}},
		{"negative batch", []string{"apply", "--storage", dir, "--log", "x", "--sink", "sqlite:///tmp/x.db", "--batch-rows", "-1"}, []string{"--batch-rows -1"}},
		{"negative grace", []string{"gc", "--storage", dir, "--log", "x", "--grace", "-1s"}, []string{"--grace -1s"}},
		{"negative limit", []string{"dump", "--storage", dir, "--log", "x", "--limit", "-1"}, []string{"--limit -1"}},
		{"checkpoint set without ts", []string{"checkpoint", "set", "--storage", dir, "--log", "x"}, []string{"accepts 1 arg"}},
		{"checkpoint set of a bad ts", []string{"checkpoint", "set", "--storage", dir, "--log", "x", "yesterday"}, []string{`"yesterday"`, "RFC 3339"}},
		{"checkpoint without set", []string{"checkpoint", "--storage", dir, "--log", "x"}, []string{"set TS"}},
	}
	for _, c := range usage {
		t.Run(c.name, func(t *testing.T) {
			r := cli(t, c.args...)
			wantCode(t, r, 2)
			mustContain(t, "stderr", r.stderr, c.want...)
			if n := strings.Count(r.stderr, "blob: "); n > 1 {
				t.Fatalf("stderr says \"blob: \" %d times:\n%s", n, r)
			}
		})
	}
	for _, cmd := range [][]string{
		{"ls"}, {"meta"}, {"dump"}, {"verify"}, {"gc", "--yes"}, {"rm", "--yes"},
		{"apply", "--sink", "sqlite://" + filepath.Join(t.TempDir(), "x.db")}, {"checkpoint", "set", "1", "--yes"},
	} {
		t.Run("missing log/"+cmd[0], func(t *testing.T) {
			r := cli(t, append(cmd, "--storage", dir, "--log", "nolog")...)
			wantCode(t, r, 1)
		})
	}
}

// TestJSONErrors: with --json, a failure prints a JSON object on stdout, as
// well as the text on stderr, for usage errors and failures alike, and
// exactly one JSON document.
func TestJSONErrors(t *testing.T) {
	dir := t.TempDir()
	store := memName(t)
	genLog(t, store, "exists")
	cases := []struct {
		args []string
		code int
	}{
		{[]string{"meta", "--storage", dir, "--log", "nolog"}, 1},
		{[]string{"ls", "--storage", dir, "--log", "nolog"}, 1},
		{[]string{"dump", "--storage", dir, "--log", "nolog"}, 1},
		{[]string{"gc", "--storage", dir, "--log", "nolog"}, 1},
		{[]string{"rm", "--storage", dir, "--log", "nolog", "--yes"}, 1},
		{[]string{"apply", "--storage", dir, "--log", "nolog", "--sink", "sqlite://" + filepath.Join(dir, "x.db")}, 1},
		{[]string{"checkpoint", "set", "5", "--storage", dir, "--log", "nolog"}, 1},
		{[]string{"gen", "--storage", store, "--log", "exists", "--rows", "10"}, 1},
		{[]string{"meta", "--storage", dir, "--log", "x", "--bogus"}, 2},
		{[]string{"ls", "--storage", fileURL(dir) + "?bogus=1", "--log", "x"}, 2},
		{[]string{"dump", "--storage", dir, "--log", "x", "--limit", "-1"}, 2},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:1], " ")+fmt.Sprint(c.code), func(t *testing.T) {
			r := cli(t, append(c.args, "--json")...)
			wantCode(t, r, c.code)
			var e jsonError
			dec := json.NewDecoder(strings.NewReader(r.stdout))
			if err := dec.Decode(&e); err != nil {
				t.Fatalf("no JSON on stdout (%v):\n%s", err, r)
			}
			if dec.More() {
				t.Fatalf("more than one JSON document on stdout:\n%s", r)
			}
			if e.Error == "" || e.ExitCode != c.code || !strings.Contains(r.stderr, e.Error) {
				t.Fatalf("JSON error %+v, want the stderr text and exit code %d:\n%s", e, c.code, r)
			}
		})
	}
	// A command that printed its own JSON (apply's summary of where it
	// stopped, verify's report) does not print a second document.
	r := cli(t, "verify", "--storage", dir, "--log", "nolog", "--json")
	wantCode(t, r, 1)
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	var v map[string]any
	if err := dec.Decode(&v); err != nil || dec.More() {
		t.Fatalf("verify --json of a missing log: want one JSON document (%v):\n%s", err, r)
	}
}

// TestCheckpointSet moves the checkpoint on local disk: forward with --yes,
// never above the global resolved ts, back only with --force, and gc then
// deletes by the new checkpoint.
func TestCheckpointSet(t *testing.T) {
	dir := t.TempDir()
	genLog(t, dir, "cp")
	var info struct {
		CheckpointTs uint64 `json:"checkpoint_ts,string"`
		ResolvedTs   uint64 `json:"resolved_ts,string"`
	}
	r := cli(t, "meta", "--storage", dir, "--log", "cp", "--json")
	wantCode(t, r, 0)
	decodeJSON(t, r.stdout, &info)
	start, resolved := info.CheckpointTs, info.ResolvedTs
	checkpoint := func() uint64 {
		t.Helper()
		r := cli(t, "meta", "--storage", dir, "--log", "cp", "--json")
		wantCode(t, r, 0)
		decodeJSON(t, r.stdout, &info)
		return info.CheckpointTs
	}
	set := func(args ...string) result {
		t.Helper()
		return cli(t, append([]string{"checkpoint", "set", "--storage", dir, "--log", "cp"}, args...)...)
	}

	// Above the global resolved ts: refused, even with --force.
	r = set(fmt.Sprint(resolved+1), "--yes", "--force")
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "above the global resolved ts")
	// Without --yes and no terminal: refused, nothing moved.
	r = set(fmt.Sprint(resolved))
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "--yes")
	if got := checkpoint(); got != start {
		t.Fatalf("checkpoint %d after refusals, want %d", got, start)
	}
	// A "no" at the prompt moves nothing; a "y" does.
	yes := true
	r = cliIn(t, "n\n", &yes, "checkpoint", "set", "--storage", dir, "--log", "cp", fmt.Sprint(resolved))
	wantCode(t, r, 1)
	if got := checkpoint(); got != start {
		t.Fatalf("checkpoint %d after a no, want %d", got, start)
	}
	r = cliIn(t, "y\n", &yes, "checkpoint", "set", "--storage", dir, "--log", "cp", fmt.Sprint(resolved))
	wantCode(t, r, 0)
	mustContain(t, "stdout", r.stdout, "checkpoint moved from")
	if got := checkpoint(); got != resolved {
		t.Fatalf("checkpoint %d, want %d", got, resolved)
	}

	// gc now deletes by it.
	r = cli(t, "gc", "--storage", dir, "--log", "cp", "--yes", "--json")
	wantCode(t, r, 0)
	var gcRes struct {
		Deleted int `json:"deleted"`
	}
	decodeJSON(t, r.stdout, &gcRes)
	if gcRes.Deleted == 0 {
		t.Fatalf("gc after checkpoint set deleted nothing:\n%s", r)
	}

	// Backwards: refused without --force, done with it (an RFC 3339 time
	// is a ts too).
	back := time.UnixMilli(int64(start>>18) + 1).UTC().Format(time.RFC3339Nano)
	r = set(back, "--yes")
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "--force")
	r = set(back, "--yes", "--force", "--json")
	wantCode(t, r, 0)
	var out struct {
		From  uint64 `json:"from,string"`
		To    uint64 `json:"checkpoint_ts,string"`
		Moved bool   `json:"moved"`
	}
	decodeJSON(t, r.stdout, &out)
	want := (start>>18 + 1) << 18
	if !out.Moved || out.From != resolved || out.To != want || checkpoint() != want {
		t.Fatalf("checkpoint set %s --force: %+v, want %d", back, out, want)
	}
}

// TestGenThenRm: gen releases its writers when it ends, so rm right after
// it needs no --force; a writer still held (live in the meta object, and
// publishing) is still refused.
func TestGenThenRm(t *testing.T) {
	store := memName(t)
	genLog(t, store, "g")
	r := cli(t, "rm", "--storage", store, "--log", "g", "--yes")
	wantCode(t, r, 0)
	mustContain(t, "rm", r.stdout, "deleted log g")

	// A writer no one released.
	genLog(t, store, "held")
	ctx := context.Background()
	b, err := blob.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	log, err := redokit.Open(ctx, b, "held")
	if err != nil {
		t.Fatal(err)
	}
	coord, err := log.OpenCoordinator(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.AddWriter(ctx, "w9"); err != nil {
		t.Fatal(err)
	}
	w, err := log.OpenWriter(ctx, "w9", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r = cli(t, "rm", "--storage", store, "--log", "held", "--yes")
	wantCode(t, r, 1)
	mustContain(t, "rm", r.stderr, `writer "w9"`, "published progress", "--force")
}

// cliTTY runs the CLI with progress bars shown, as on a terminal.
func cliTTY(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errb)
	on := true
	a.progressTTY = &on
	code := a.execute(context.Background(), args)
	return result{out.String(), errb.String(), code}
}

// TestProgressBars: apply and dump show events and the time left, never
// commit-ts differences; verify shows bytes against a total.
func TestProgressBars(t *testing.T) {
	store := memName(t)
	genLog(t, store, "p", "--rows", "20000")
	r := cli(t, "meta", "--storage", store, "--log", "p", "--json")
	var info struct {
		CheckpointTs uint64 `json:"checkpoint_ts,string"`
		ResolvedTs   uint64 `json:"resolved_ts,string"`
	}
	decodeJSON(t, r.stdout, &info)
	span := fmt.Sprint(info.ResolvedTs - info.CheckpointTs)
	rawTs := regexp.MustCompile(`\d+/` + span)
	eta := regexp.MustCompile(`\[\d+s:\d+s\]`)

	check := func(name string, r result, want ...string) {
		t.Helper()
		wantCode(t, r, 0)
		if rawTs.MatchString(r.stderr) {
			t.Fatalf("%s's bar counts commit-ts differences:\n%q", name, r.stderr)
		}
		mustContain(t, name+" bar", r.stderr, want...)
		if !eta.MatchString(r.stderr) {
			t.Fatalf("%s's bar shows no time left:\n%q", name, r.stderr)
		}
	}
	r = cliTTY(t, "dump", "--storage", store, "--log", "p")
	check("dump", r, "reading: ", " events", "%")
	r = cliTTY(t, "apply", "--storage", store, "--log", "p", "--sink", "sqlite://"+filepath.Join(t.TempDir(), "p.db"))
	check("apply", r, "applying: ", " events", "%")
	r = cliTTY(t, "verify", "--storage", store, "--log", "p")
	check("verify", r, "verifying", "B/", "%")
}

// TestDemoOnMemPrintsNoDeadCommands: after a demo on mem:// the log is
// gone, so no follow-up command naming it is printed, and one writer is
// "1 writer".
func TestDemoOnMemPrintsNoDeadCommands(t *testing.T) {
	r := cli(t, "demo", "--storage", memName(t), "--dir", t.TempDir(), "--rows", "1500", "--writers", "1")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "redokit meta") || strings.Contains(r.stdout, "redokit ls") {
		t.Fatalf("a demo on mem:// printed commands that cannot find its log:\n%s", r)
	}
	mustContain(t, "demo", r.stdout, "is gone", "sqlite3", "through 1 writer;")
	if strings.Contains(r.stdout+r.stderr, "1 writers") {
		t.Fatalf("1 writers:\n%s", r)
	}
}

func TestLsOneWriter(t *testing.T) {
	store := memName(t)
	genLog(t, store, "one", "--writers", "1")
	r := cli(t, "ls", "--storage", store, "--log", "one")
	wantCode(t, r, 0)
	mustContain(t, "ls", r.stdout, ", 1 writer,")
}

// TestDumpCreateDatabase: a DDL of a whole schema names the schema, not a
// table "demo.".
func TestDumpCreateDatabase(t *testing.T) {
	store := memName(t)
	genLog(t, store, "d")
	r := cli(t, "dump", "--storage", store, "--log", "d", "--start-ts", "0")
	wantCode(t, r, 0)
	found := false
	for line := range strings.Lines(r.stdout) {
		if !strings.Contains(line, `"ddl_type":"create schema"`) {
			continue
		}
		found = true
		var ev map[string]any
		decodeJSON(t, line, &ev)
		if _, ok := ev["table"]; ok || ev["schema"] != "demo" {
			t.Fatalf("CREATE DATABASE shown as %s", line)
		}
	}
	if !found {
		t.Fatalf("no CREATE DATABASE in the dump:\n%.2000s", r.stdout)
	}
	if strings.Contains(r.stdout, `"demo."`) {
		t.Fatal(`the dump names a table "demo."`)
	}
}

// TestInterruptedMessage: an interrupted command says so in one message,
// whatever the sink or store reported for the canceled call.
func TestInterruptedMessage(t *testing.T) {
	store := memName(t)
	genLog(t, store, "i")
	sinks := []string{"sqlite://" + filepath.Join(t.TempDir(), "i.db"), "mysql://root:pw@127.0.0.1:1/x"}
	var msgs []string
	for _, sink := range sinks {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		var out, errb bytes.Buffer
		code := newApp(strings.NewReader(""), &out, &errb).execute(ctx, []string{"apply", "--storage", store, "--log", "i", "--sink", sink})
		if code != 1 {
			t.Fatalf("interrupted apply to %s: exit %d\n%s", sink, code, errb.String())
		}
		msgs = append(msgs, errb.String())
	}
	want := "redokit: interrupted: redokit apply stopped before it finished\n"
	for i, m := range msgs {
		if m != want {
			t.Fatalf("interrupted apply to %s printed %q, want %q", sinks[i], m, want)
		}
	}
}

func TestVersion(t *testing.T) {
	r := cli(t, "--version")
	wantCode(t, r, 0)
	if !regexp.MustCompile(`^redokit \S+.*go1\.\d+`).MatchString(r.stdout) {
		t.Fatalf("--version printed %q", r.stdout)
	}
}

// TestUnreachableMySQLNamesTheCause: a server that takes the connection and
// drops it makes the driver say only "invalid connection"; the error names
// the server and what the driver saw, and the driver prints nothing of its
// own to stderr (a real MariaDB is not needed: the driver's log lines come
// from the dropped connection).
func TestUnreachableMySQLNamesTheCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	store := memName(t)
	genLog(t, store, "u")
	var r result
	leaked := captureFD2(t, func() {
		r = cli(t, "apply", "--storage", store, "--log", "u", "--sink", "mysql://root:hunter2secret@"+ln.Addr().String()+"/x")
	})
	if strings.Contains(leaked, "[mysql]") || strings.Contains(leaked, "packets.go") {
		t.Errorf("the MySQL driver logged to stderr itself:\n%s", leaked)
	}
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "invalid connection", "server "+ln.Addr().String()+": ", "EOF")
	if strings.Contains(r.stdout+r.stderr+leaked, "hunter2secret") {
		t.Fatal("the password was printed")
	}
}

// TestVerifyOnS3NoSDKLogs: reading from an S3 server that sends no
// checksums prints none of the SDK's DEBUG lines.
func TestVerifyOnS3NoSDKLogs(t *testing.T) {
	store := s3Storage(t)
	// The SDK's default, which a user without the emulators' environment
	// has: it validates every response that carries a checksum, and logged
	// a line for each that did not.
	t.Setenv("AWS_RESPONSE_CHECKSUM_VALIDATION", "when_supported")
	genLog(t, store, "v")
	var r result
	leaked := captureFD2(t, func() {
		r = cli(t, "verify", "--storage", store, "--log", "v")
		wantCode(t, r, 0)
		r = cli(t, "dump", "--storage", store, "--log", "v", "--limit", "10")
		wantCode(t, r, 0)
	})
	for _, s := range []string{leaked, r.stderr} {
		if strings.Contains(s, "DEBUG") || strings.Contains(s, "no supported checksum") {
			t.Fatalf("the AWS SDK logged to stderr:\n%.3000s", s)
		}
	}
}
