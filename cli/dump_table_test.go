package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// dump --table takes apply --table's patterns (schema.table, globs), and a
// pattern that matched no event of the range is said on stderr (issue 29,
// item 7: dump took "t1" that apply refuses, and an unknown table was
// silent).
func TestDumpTablePatterns(t *testing.T) {
	store := filepath.Join(t.TempDir(), "redo")
	wantCode(t, cli(t, "gen", "--storage", store, "--log", "x", "--rows", "200"), 0)
	r := cli(t, "dump", "--storage", store, "--log", "x", "--table", "*.t1", "--table", "nosuch.tbl")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `"table":"demo.t1"`) || strings.Contains(r.stdout, `"table":"demo.t2"`) {
		t.Fatalf("dump --table *.t1: stdout does not hold exactly demo.t1's events:\n%.400s", r.stdout)
	}
	mustContain(t, "dump stderr", r.stderr, `--table "nosuch.tbl" matched no event`)
	if strings.Contains(r.stderr, `"*.t1" matched no event`) {
		t.Fatalf("dump said a pattern that matched events matched none: %s", r.stderr)
	}
	r = cli(t, "dump", "--storage", store, "--log", "x", "--table", "t1")
	wantCode(t, r, 2)
}
