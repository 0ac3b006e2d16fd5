package cli

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// Issue 27, finding 4: a replay over a downstream that ran ahead says what it
// did per table — rows replaced, skipped as already applied, and rows of a
// table without a key inserted where an identical row was there — on the
// terminal and in --json.
func TestApplyConflictReport(t *testing.T) {
	store := memName(t)
	keyless := func(k int, a int64) logEvent {
		return logEvent{k: k, rows: []codec.RowChange{{StartTs: tsAt(k) - 1, CommitTs: tsAt(k), Table: codec.TableName{Schema: "shop", Name: "log"},
			Columns: []codec.Column{
				{Name: "a", Type: codec.TypeLonglong, Flags: codec.FlagNullable, Value: codec.IntValue(a)},
				{Name: "v", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Value: codec.StringValue("x")},
			}}}}
	}
	ev := []logEvent{
		ddlTx(1, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE IF NOT EXISTS shop"),
		ddlTx(2, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE shop.orders (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
		ddlTx(3, "shop", "log", codec.ActionCreateTable, "CREATE TABLE shop.log (a BIGINT, v VARCHAR(20))"),
	}
	for k := 4; k <= 9; k++ {
		tx := rowsTx(k, "shop.orders")
		tx.rows = append(tx.rows, keyless(k, int64(k)).rows...)
		ev = append(ev, tx)
	}
	writeLog(t, store, "r", ev)
	path := filepath.Join(t.TempDir(), "r.db")
	sink := "sqlite://" + path
	// The downstream's own sink ran to k = 7 (its progress is not this
	// apply's).
	r := cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink, "--progress-table", "its_own", "--end-ts", fmt.Sprint(tsAt(7)))
	wantCode(t, r, 0)

	// The recovery replays the log from its start over it.
	r = cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink, "--json")
	wantCode(t, r, 0)
	var sum applySummary
	decodeJSON(t, r.stdout, &sum)
	c := sum.Conflicts
	if c == nil || c.DuplicatedKeyless != 4 || c.Replaced != 0 || len(c.Tables) != 1 ||
		c.Tables[0] != (apply.TableConflicts{Schema: "shop", Table: "log", DuplicatedKeyless: 4}) {
		t.Fatalf("conflicts %+v, want 4 rows of shop.log duplicated\n%s", c, r.stdout)
	}
	mustContain(t, "json", r.stdout, `"duplicated_keyless": 4`, `"tables": [`, `"table": "log"`)
	if got := sqliteTables(t, path); !equalMaps(got, map[string]int{"orders": 6, "log": 10, "its_own": 3}) {
		t.Fatalf("tables %v", got)
	}

	// A rerun skips everything, per table, on the terminal too.
	r = cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink)
	wantCode(t, r, 0)
	mustContain(t, "stdout", r.stdout, "0 rows replaced over a stale unique value; 0 deletes matched no row; 0 rows inserted into a table without a key",
		"  shop.log ", "  shop.orders ", "6 skipped as already applied, 0 replaced, 0 deletes missed, 0 duplicated (no key)")
	r = cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink, "--json")
	wantCode(t, r, 0)
	sum = applySummary{}
	decodeJSON(t, r.stdout, &sum)
	want := []apply.TableConflicts{{Schema: "shop", Table: "log", Skipped: 6}, {Schema: "shop", Table: "orders", Skipped: 6}}
	if c := sum.Conflicts; c == nil || !c.Zero() || fmt.Sprint(c.Tables) != fmt.Sprint(want) {
		t.Fatalf("rerun conflicts %+v, want %+v", c, want)
	}

	// The replay's text report: the duplicated rows, per table, and what
	// they mean.
	path2 := filepath.Join(t.TempDir(), "r2.db")
	sink2 := "sqlite://" + path2
	wantCode(t, cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink2, "--progress-table", "its_own", "--end-ts", fmt.Sprint(tsAt(7))), 0)
	r = cli(t, "apply", "--storage", store, "--log", "r", "--sink", sink2)
	wantCode(t, r, 0)
	mustContain(t, "stdout", r.stdout, "4 rows inserted into a table without a key where an identical row was there already",
		"  shop.log ", "0 skipped as already applied, 0 replaced, 0 deletes missed, 4 duplicated (no key)", "may now hold such a row twice")
}
