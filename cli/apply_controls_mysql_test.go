package cli

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/testkit/testenv"
)

// TestApplyMapSchemaToMySQL: with --map-schema src=replica and the sink URI
// naming replica, every table of the log's schema src lands in replica, next
// to the progress table, and src is never created downstream; DDLs run there
// too, their qualified names mapped, their unqualified ones by USE.
func TestApplyMapSchemaToMySQL(t *testing.T) {
	addr := needServer(t, "REDOKIT_MYSQL_ADDR")
	src, replica := testenv.UniqueName("src_"), testenv.UniqueName("replica_")
	db, err := sql.Open("mysql", (&mysql.Config{User: "root", Net: "tcp", Addr: addr, AllowNativePasswords: true}).FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE `"+replica+"`"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+replica+"`")
		_, _ = db.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+src+"`")
	})
	ev := []logEvent{
		ddlTx(1, src, "", codec.ActionCreateSchema, "CREATE DATABASE IF NOT EXISTS `"+src+"`"),
		ddlTx(2, src, "orders", codec.ActionCreateTable, "CREATE TABLE "+src+".orders (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20))"),
		ddlTx(3, src, "items", codec.ActionCreateTable, "CREATE TABLE `"+src+"`.`items` (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(20) COMMENT '"+src+".x')"),
	}
	for k := 4; k <= 10; k++ {
		ev = append(ev, rowsTx(k, src+".orders", src+".items"))
	}
	ev = append(ev, ddlTx(11, src, "orders_old", codec.ActionRenameTable, "RENAME TABLE orders TO `"+src+"`.orders_old"),
		rowsTx(12, src+".orders_old"),
		ddlTx(13, src, "items", codec.ActionAddColumn, "ALTER TABLE items ADD COLUMN c INT"))
	store := memName(t)
	writeLog(t, store, "mm", ev)

	sink := fmt.Sprintf("mysql://root@%s/%s", addr, replica)
	r := cli(t, "apply", "--storage", store, "--log", "mm", "--sink", sink, "--map-schema", src+"="+replica, "--json")
	wantCode(t, r, 0)
	var sum applySummary
	decodeJSON(t, r.stdout, &sum)

	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	if n := count("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = '" + src + "'"); n != 0 {
		t.Errorf("the log's schema %s was created downstream", src)
	}
	if n := count("SELECT COUNT(*) FROM `" + replica + "`.orders_old"); n != 8 {
		t.Errorf("%s.orders_old has %d rows, want 8", replica, n)
	}
	if n := count("SELECT COUNT(*) FROM `" + replica + "`.items WHERE c IS NULL"); n != 7 {
		t.Errorf("%s.items has %d rows, want 7 with the added column", replica, n)
	}
	if n := count("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = '" + replica + "' AND table_name = 'items' AND column_comment = '" + src + ".x'"); n != 1 {
		t.Errorf("the comment %q was rewritten", src+".x")
	}
	// The progress table is in replica, naming the mapped tables; the
	// report says the same.
	rows, err := db.QueryContext(t.Context(), "SELECT schema_name, table_name, commit_ts FROM `"+replica+"`.redokit_apply_progress WHERE table_name <> ''")
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for rows.Next() {
		var s, n string
		var ts uint64
		if err := rows.Scan(&s, &n, &ts); err != nil {
			t.Fatal(err)
		}
		held[s+"."+n] = fmt.Sprint(ts)
	}
	rows.Close()
	got := reported(sum.Applied)
	delete(got, "")
	want := map[string]string{replica + ".orders": fmt.Sprint(tsAt(10)), replica + ".items": fmt.Sprint(tsAt(10)), replica + ".orders_old": fmt.Sprint(tsAt(12))}
	if !equalMaps(held, want) || !equalMaps(got, want) {
		t.Fatalf("progress table %v, reported %v, want %v", held, got, want)
	}
}
