package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redokit/redokit/codec"
)

// Issue 27, finding 7: a --table filter crossed by a rename stopped, and a
// rerun stopped at the same place, with no way on named. The apply still
// stops before the DDL (the filter cannot follow a rename by itself: a run
// resuming past it with the same flags would not select the new name, and a
// table renamed into the filter brings rows the downstream never had), but
// names the DDL, its commit ts and the exact flags that go on — and each
// way it names goes on.
func TestApplyFilterRenameWayOn(t *testing.T) {
	store := memName(t)
	writeLog(t, store, "f", shopLog()) // k = 21: RENAME TABLE orders TO orders_old
	path := filepath.Join(t.TempDir(), "f.db")
	base := []string{"apply", "--storage", store, "--log", "f", "--sink", "sqlite://" + path, "--table", "shop.orders"}
	endBefore := fmt.Sprintf("--end-ts %d", tsAt(21)-1)

	for range 2 { // a rerun stops at the same place, and says the same
		r := cli(t, base...)
		wantCode(t, r, 1)
		mustContain(t, "stderr", r.stderr, "RENAME TABLE orders TO orders_old", fmt.Sprintf("commit ts %d", tsAt(21)),
			"shop.orders (selected)", "shop.orders_old (not selected)", "stops here again",
			endBefore, "add --table shop.orders_old:", "rows after it follow it under its new name")
		// The summary on stdout must not promise that a rerun goes on.
		mustContain(t, "stdout", r.stdout, "stops at the same DDL")
		if strings.Contains(r.stdout, "resumes there") {
			t.Fatalf("stdout says a rerun resumes:\n%s", r.stdout)
		}
	}
	// An --exclude-table that excludes the new name must go too.
	r := cli(t, append(base, "--exclude-table", "*.*_old")...)
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "add --table shop.orders_old and drop --exclude-table '*.*_old':")

	// The first way on: stop before the rename.
	r = cli(t, append(base, "--end-ts", fmt.Sprint(tsAt(21)-1))...)
	wantCode(t, r, 0)
	if got := sqliteTables(t, path); !equalMaps(got, map[string]int{"orders": 15}) {
		t.Fatalf("up to the rename: tables %v", got)
	}
	// The second: follow the table to its new name.
	follow := append(base, "--table", "shop.orders_old")
	for range 2 { // and a rerun agrees
		r = cli(t, follow...)
		wantCode(t, r, 0)
		if got := sqliteTables(t, path); !equalMaps(got, map[string]int{"orders_old": 16}) {
			t.Fatalf("following the rename: tables %v\n%s%s", got, r.stdout, r.stderr)
		}
	}
}

// A table renamed into the filter: the online-schema-change cutover, RENAME
// TABLE orders TO orders_old, orders_new TO orders, under --table
// shop.orders. orders_new's rows were filtered out, so the way on is to stop
// before the cutover, or to select the tables once the downstream holds
// orders_new; a fresh downstream with all three selected from the start of
// the log applies it whole.
func TestApplyFilterRenameIntoFilter(t *testing.T) {
	store := memName(t)
	ev := shopLog()[:10] // shop, crm, orders, items, users; rows at k = 6..10
	ev = append(ev,
		ddlTx(11, "shop", "orders_new", codec.ActionCreateTable, "CREATE TABLE shop.orders_new (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
		rowsTx(12, "shop.orders_new", "shop.orders"),
		ddlTx(13, "shop", "orders", codec.ActionRenameTables, "RENAME TABLE orders TO orders_old, orders_new TO orders"),
		rowsTx(14, "shop.orders"))
	writeLog(t, store, "c", ev)
	path := filepath.Join(t.TempDir(), "c.db")
	base := []string{"apply", "--storage", store, "--log", "c", "--sink", "sqlite://" + path, "--table", "shop.orders"}

	r := cli(t, base...)
	wantCode(t, r, 1)
	mustContain(t, "stderr", r.stderr, "RENAME TABLE orders TO orders_old, orders_new TO orders", fmt.Sprintf("commit ts %d", tsAt(13)),
		"shop.orders (selected) to shop.orders_old (not selected)", "shop.orders_new (not selected) to shop.orders (selected)",
		fmt.Sprintf("--end-ts %d", tsAt(13)-1), "add --table shop.orders_old --table shop.orders_new, but only once the downstream holds shop.orders_new as the log has them")
	r = cli(t, append(base, "--end-ts", fmt.Sprint(tsAt(13)-1))...)
	wantCode(t, r, 0)
	if got := sqliteTables(t, path); !equalMaps(got, map[string]int{"orders": 6}) {
		t.Fatalf("up to the cutover: tables %v", got)
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	r = cli(t, "apply", "--storage", store, "--log", "c", "--sink", "sqlite://"+fresh,
		"--table", "shop.orders", "--table", "shop.orders_old", "--table", "shop.orders_new")
	wantCode(t, r, 0)
	if got := sqliteTables(t, fresh); !equalMaps(got, map[string]int{"orders": 2, "orders_old": 6}) {
		t.Fatalf("all three selected from the start: tables %v", got)
	}
}
