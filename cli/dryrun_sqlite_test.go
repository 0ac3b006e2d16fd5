package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// apply --dry-run changes nothing downstream, the SQLite file included: a
// missing file is not created (issue 29, item 7 and issue 27, item 7: it
// was), and an existing one is left byte for byte as it was.
func TestDryRunCreatesNoSQLiteFile(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "redo")
	wantCode(t, cli(t, "gen", "--storage", store, "--log", "x", "--rows", "50"), 0)
	db := filepath.Join(dir, "out.db")
	r := cli(t, "apply", "--storage", store, "--log", "x", "--sink", "sqlite://"+db, "--dry-run")
	wantCode(t, r, 0)
	mustContain(t, "apply --dry-run", r.stdout, "dry run: nothing was applied", "INSERT")
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("apply --dry-run created %s (stat: %v)", db, err)
	}
	wantCode(t, cli(t, "apply", "--storage", store, "--log", "x", "--sink", "sqlite://"+db), 0)
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, cli(t, "apply", "--storage", store, "--log", "x", "--sink", "sqlite://"+db, "--dry-run", "--start-ts", "0"), 0)
	after, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatal("apply --dry-run changed the SQLite file")
	}
}
