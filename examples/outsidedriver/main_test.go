package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildRedokit builds this example, a redokit with the outside driver
// linked in by its five-line main, with the go command that runs the test.
func buildRedokit(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "redokit-tinyfs")
	start := time.Now()
	// go test puts its own GOROOT/bin first in the test's PATH.
	cmd := exec.Command("go", "build", "-o", bin, ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build of the example: %v\n%s", err, out)
	}
	t.Logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// runBin runs the built binary and returns its stdout, stderr and exit code.
func runBin(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "REDOKIT_STORAGE=", "REDOKIT_LOG=")
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

func tinyfsURL(dir, query string) string {
	u := url.URL{Scheme: "tinyfs", Path: dir, RawQuery: query}
	return u.String()
}

// TestOutsideDriver builds redokit with tinyfs, which redokit itself does
// not register, and runs on it what docs/BACKENDS.md tells a backend author
// to run: check (the conformance suite) and a short torture (writer
// processes, which are this binary re-executed, killed with SIGKILL).
func TestOutsideDriver(t *testing.T) {
	bin := buildRedokit(t)

	t.Run("check", func(t *testing.T) {
		dir := t.TempDir()
		stdout, stderr, code := runBin(t, bin, "check", "--storage", tinyfsURL(dir, "page_size=7"), "--large-size", "1048576", "--json")
		if code != 0 {
			t.Fatalf("check exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
		}
		var out struct {
			Storage string `json:"storage"`
			OK      bool   `json:"ok"`
			Checks  []struct {
				Check  string `json:"check"`
				Result string `json:"result"`
				Detail string `json:"detail"`
			} `json:"checks"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil {
			t.Fatalf("check --json printed no JSON (%v):\n%s", err, stdout)
		}
		if !out.OK || !strings.HasPrefix(out.Storage, "tinyfs://") {
			t.Fatalf("check on %s: ok %v\n%s", out.Storage, out.OK, stdout)
		}
		results, details := map[string]string{}, map[string]string{}
		for _, c := range out.Checks {
			results[c.Check], details[c.Check] = c.Result, c.Detail
		}
		for _, name := range []string{"Plain/RoundTrip", "Plain/ListPages", "Prefixed/CompareAndSwap", "Plain/BatchDelete", "Plain/Append"} {
			if results[name] != "pass" {
				t.Errorf("%s: %q, want pass", name, results[name])
			}
		}
		// The checks ran on tinyfs's driver, not the local one it wraps:
		// tinyfs has no Appender, so Append checks only that it says so
		// (one subtest), where file:// runs the appends too.
		if details["Plain/Append"] != "1 subtests" {
			t.Errorf("Plain/Append: %q, want only its Capability subtest (tinyfs cannot append)", details["Plain/Append"])
		}
	})

	t.Run("torture", func(t *testing.T) {
		dir := t.TempDir()
		stdout, stderr, code := runBin(t, bin, "torture", "--storage", tinyfsURL(dir, ""), "--duration", "2s", "--writers", "2", "--seed", "11", "--json")
		var v struct {
			Verdict string `json:"verdict"`
			Mode    string `json:"mode"`
			Counts  struct {
				Flushes, Reads, Kills int64
			}
		}
		if err := json.Unmarshal([]byte(stdout), &v); err != nil {
			t.Fatalf("torture --json exited %d and printed no JSON (%v):\n%s\n--- stderr\n%s", code, err, stdout, stderr)
		}
		t.Logf("%s: %+v (%s)", v.Verdict, v.Counts, v.Mode)
		if code != 0 || v.Verdict != "PASS" {
			t.Fatalf("torture exited %d, verdict %s\n%s\n--- stderr\n%s", code, v.Verdict, stdout, stderr)
		}
		if !strings.Contains(v.Mode, "SIGKILL") || v.Counts.Kills == 0 || v.Counts.Flushes == 0 {
			t.Fatalf("mode %q, counts %+v: want writer processes of the built binary killed after acknowledged flushes", v.Mode, v.Counts)
		}
	})

	t.Run("usage", func(t *testing.T) {
		// The driver refuses a URL it cannot serve, through redokit's usage
		// path (exit 2: a parameter the backend does not take).
		_, stderr, code := runBin(t, bin, "meta", "--storage", "tinyfs:///x?secret_key=hunter2", "--log", "a")
		if code != 2 || !strings.Contains(stderr, "secret_key") || strings.Contains(stderr, "hunter2") {
			t.Fatalf("exit %d, stderr %q: want 2 naming secret_key without its value", code, stderr)
		}
		stdout, _, code := runBin(t, bin, "--version")
		if code != 0 || !strings.HasPrefix(stdout, "redokit ") {
			t.Fatalf("--version: exit %d, %q", code, stdout)
		}
	})
}
