package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// An error of the library wrapped by the CLI carries one "redokit:"
// prefix, not two (issue 29, item 7).
func TestOneRedokitPrefix(t *testing.T) {
	store := filepath.Join(t.TempDir(), "redo")
	wantCode(t, cli(t, "gen", "--storage", store, "--log", "x", "--rows", "20"), 0)
	r := cli(t, "dump", "--storage", store, "--log", "x", "--end-ts", "999999999999999999")
	wantCode(t, r, 1)
	if n := strings.Count(r.stderr, "redokit:"); n != 1 {
		t.Fatalf("stderr holds %d \"redokit:\" prefixes, want 1: %q", n, r.stderr)
	}
	if got := onePrefix("redokit: a: redokit: b: meta: c"); got != "a: b: meta: c" {
		t.Fatalf("onePrefix: %q", got)
	}
}
