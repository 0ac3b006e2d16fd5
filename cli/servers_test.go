package cli

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/testkit/s3test"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/testkit/workload"
)

// These tests run the CLI against the real servers scripts/emulators.sh
// starts (versitygw for S3, MariaDB for the MySQL sink). Without them they
// skip, except under CI=true, where a missing server is a failure.

func needServer(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		testenv.Need(t, name+" is not set: start the local servers with scripts/emulators.sh (or run scripts/test.sh)")
	}
	return v
}

// s3Storage creates a fresh bucket on the S3 server and returns its URL.
func s3Storage(t *testing.T) string {
	t.Helper()
	return s3test.NewBucket(t, "redokit-cli-")
}

// TestBenchOnS3 runs bench against a real S3 API: the raw PUT baseline is
// measured, and nothing is left in the bucket afterwards.
func TestBenchOnS3(t *testing.T) {
	store := s3Storage(t)
	r := cli(t, "bench", "--storage", store, "--seconds", "300ms", "--reps", "1", "--json")
	wantCode(t, r, 0)
	mustContain(t, "bench", r.stdout, "raw PUT MiB/s", "writer stored ÷ raw PUT", "read (merge, decoded) rows/s")
	if strings.Contains(r.stdout+r.stderr, os.Getenv("AWS_SECRET_ACCESS_KEY")) {
		t.Fatal("the secret key was printed")
	}
	b, err := blob.Open(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for a, err := range b.List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("bench left %s in the bucket", a.Key)
	}
}

func TestCheckOnS3(t *testing.T) {
	store := s3Storage(t)
	r := cli(t, "check", "--storage", store)
	wantCode(t, r, 0)
	t.Logf("redokit check on S3:\n%s", r.stdout)
	mustContain(t, "check", r.stdout, "Plain/ConditionalCreate", "Prefixed/BatchDelete", "is fit to hold a redo log")
	if strings.Contains(r.stdout+r.stderr, os.Getenv("AWS_SECRET_ACCESS_KEY")) {
		t.Fatal("the secret key was printed")
	}
}

func TestDemoOnS3(t *testing.T) {
	store := s3Storage(t)
	r := cli(t, "demo", "--storage", store, "--dir", t.TempDir(), "--rows", "3000", "--ddl-rate", "0.02")
	wantCode(t, r, 0)
	mustContain(t, "demo", r.stdout, "[failover]", "identical", "PASS")
	wantCode(t, cli(t, "verify", "--storage", store, "--log", "demo"), 0)
	r = cli(t, "ls", "--storage", store, "--log", "demo", "--json")
	wantCode(t, r, 0)
	var ls struct {
		Summary segSum `json:"summary"`
	}
	decodeJSON(t, r.stdout, &ls)
	if ls.Summary.Active != 0 || ls.Summary.Sealed == 0 {
		t.Fatalf("segments on an object store: %+v", ls.Summary)
	}
}

func TestApplyToMySQL(t *testing.T) {
	addr := needServer(t, "REDOKIT_MYSQL_ADDR")
	schema := testenv.UniqueName("cli_")
	store := memName(t)
	genLog(t, store, "my", "--schema", schema)
	// The downstream database exists, as it would; the log's own CREATE
	// DATABASE then finds it there.
	db, err := sql.Open("mysql", (&mysql.Config{User: "root", Net: "tcp", Addr: addr, AllowNativePasswords: true}).FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE `"+schema+"`"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP DATABASE `"+schema+"`") })
	sink := fmt.Sprintf("mysql://root@%s/%s", addr, schema)
	r := cli(t, "apply", "--storage", store, "--log", "my", "--sink", sink)
	wantCode(t, r, 0)
	mustContain(t, "apply", r.stdout, "applied the redo log successfully", "(1500 rows")

	cfg := (&workloadFlags{rows: 1500, tables: 4, rowSize: 200, writers: 3, txnRows: 8, ddlRate: 0.02, seed: 1, schema: schema}).config()
	c, err := compareDB(t.Context(), db, mysqlDB, workload.Expected(cfg, math.MaxUint64))
	if err != nil {
		t.Fatal(err)
	}
	if c.Differences != 0 || c.Rows == 0 {
		t.Fatalf("MySQL after apply: %+v", c)
	}

	// A wrong password is an error that does not show it.
	r = cli(t, "apply", "--storage", store, "--log", "my", "--sink", fmt.Sprintf("mysql://nobody:wr0ngpassw0rd@%s/%s", addr, schema))
	wantCode(t, r, 1)
	if strings.Contains(r.stdout+r.stderr, "wr0ngpassw0rd") {
		t.Fatalf("the password was printed:\n%s", r)
	}
}
