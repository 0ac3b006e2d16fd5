package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redokit/redokit/codec"
)

// A transaction larger than --split-mib that must be applied whole (it
// deletes a row it inserted, after its inserts): the run hands it out in
// parts, finds that too late (apply.SplitTooLateError, nothing of it
// committed), and applies it again, whole, by itself; the next transaction
// goes on as before. Before, the command stopped there, and the way on was
// a rerun with a --split-mib above the transaction's size.
func TestApplyReappliesWholeAfterSplitTooLate(t *testing.T) {
	store := memName(t)
	big := logEvent{k: 3}
	orders := codec.TableName{Schema: "shop", Name: "orders"}
	row := func(id int) []codec.Column {
		return []codec.Column{
			{Name: "id", Type: codec.TypeLonglong, Flags: codec.FlagPrimaryKey | codec.FlagHandleKey, Value: codec.IntValue(int64(id))},
			{Name: "v", Type: codec.TypeVarchar, Flags: codec.FlagNullable, Charset: "utf8mb4", Value: codec.StringValue(strings.Repeat("x", 500))},
		}
	}
	const n = 3000 // about 1.6 MiB of row changes
	for id := 1000; id < 1000+n; id++ {
		big.rows = append(big.rows, codec.RowChange{StartTs: tsAt(3) - 1, CommitTs: tsAt(3), Table: orders, Columns: row(id)})
	}
	big.rows = append(big.rows, codec.RowChange{StartTs: tsAt(3) - 1, CommitTs: tsAt(3), Table: orders, PreColumns: row(1000)})
	writeLog(t, store, "s", []logEvent{
		ddlTx(1, "shop", "", codec.ActionCreateSchema, "CREATE DATABASE IF NOT EXISTS shop"),
		ddlTx(2, "shop", "orders", codec.ActionCreateTable, "CREATE TABLE shop.orders (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(600))"),
		big,
		rowsTx(4, "shop.orders"),
	})
	said := fmt.Sprintf("shop.orders at commit ts %d went to the sink in parts and must be applied whole", tsAt(3))
	path := filepath.Join(t.TempDir(), "s.db")
	r := cli(t, "apply", "--storage", store, "--log", "s", "--sink", "sqlite://"+path, "--split-mib", "1", "--json")
	wantCode(t, r, 0)
	mustContain(t, "stderr", r.stderr, said, "applying it again, whole")
	// The summary counts each row and DDL once, as applied: the rerun
	// skipped what the first attempt committed (the DDLs before the big
	// transaction), not what the log held applied before the command.
	mustContain(t, "the summary", r.stdout, fmt.Sprintf(`"rows": %d,`, n+2), `"ddls": 2,`, `"skipped": 0,`)
	if got := sqliteTables(t, path); !equalMaps(got, map[string]int{"orders": n - 1 + 1}) {
		t.Fatalf("tables %v, want orders with %d rows\n%s%s", got, n, r.stdout, r.stderr)
	}

	// --follow does the same within its round, and follows on.
	path = filepath.Join(t.TempDir(), "f.db")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		a := newApp(strings.NewReader(""), &out, &errb)
		done <- a.execute(ctx, []string{"apply", "--storage", store, "--log", "s", "--sink", "sqlite://" + path, "--follow", "--json", "--split-mib", "1"})
	}()
	// The round that ends at the log's last commit ts.
	if !out.waitFor(fmt.Sprintf(`"end_ts":"%d"`, tsAt(4)), 30*time.Second) {
		stop()
		<-done
		t.Fatalf("--follow did not apply the log:\n%s\n%s", out.String(), errb.String())
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("--follow: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	mustContain(t, "stderr", errb.String(), said, "applying it again, whole")
	// The summary counts what was applied once: the rows of both
	// transactions and the two DDLs, whichever attempt committed them.
	var last string
	for line := range strings.Lines(out.String()) {
		if strings.Contains(line, `"stopped":`) {
			last = line
		}
	}
	mustContain(t, "the stop summary", last, fmt.Sprintf(`"rows":%d,"ddls":2,`, n+2))
	if got := sqliteTables(t, path); !equalMaps(got, map[string]int{"orders": n}) {
		t.Fatalf("--follow: tables %v, want orders with %d rows\n%s%s", got, n, out.String(), errb.String())
	}
}
