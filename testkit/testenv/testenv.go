// Package testenv is how a test finds a local server that
// scripts/emulators.sh started (MariaDB, PostgreSQL): through an environment
// variable the script exports. A test that needs a server and finds none
// skips outside CI, saying why, and fails under CI=true, where every server
// must be there: no skipped test may hide a failure in CI.
package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
)

// Server returns the value of the environment variable envVar, which names
// a server of kind what ("MariaDB", "PostgreSQL") that scripts/emulators.sh
// starts as name; when it is unset the test skips, or fails under CI=true.
func Server(t testing.TB, envVar, what, name string) string {
	t.Helper()
	v := os.Getenv(envVar)
	if v == "" {
		Need(t, fmt.Sprintf("%s is not set: the %s tests need it (source scripts/emulators.sh && emulators_start %s)", envVar, what, name))
	}
	return v
}

// Need ends a test that cannot run here: it skips, printing reason, or,
// under CI=true, where every server must be there, fails with it.
func Need(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatal(reason + " (CI is set: this test must run)")
	}
	t.Skip("skipping: " + reason)
}

// Postgres returns REDOKIT_POSTGRES_DSN (see Server).
func Postgres(t testing.TB) string {
	t.Helper()
	return Server(t, "REDOKIT_POSTGRES_DSN", "PostgreSQL", "postgres")
}

// MySQL returns REDOKIT_MYSQL_DSN (see Server).
func MySQL(t testing.TB) string {
	t.Helper()
	return Server(t, "REDOKIT_MYSQL_DSN", "MariaDB", "mariadb")
}

// UniqueName returns prefix and 8 random hex digits: a name (a bucket, a
// database, a schema) that no other test or run uses.
func UniqueName(prefix string) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return prefix + hex.EncodeToString(r[:])
}
