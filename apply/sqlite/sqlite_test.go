package sqlite

import (
	"net/url"
	"strings"
	"testing"
)

func TestParseURI(t *testing.T) {
	for uri, want := range map[string]string{
		"sqlite:///tmp/a b.db": "file:/tmp/a%20b.db?",
		"sqlite:rel/a.db":      "file:rel/a.db?",
		"sqlite3:rel/a.db":     "file:rel/a.db?",
	} {
		dsn, _, err := parseURI(uri)
		if err != nil || !strings.HasPrefix(dsn, want) || !strings.Contains(dsn, "journal_mode%28WAL%29") {
			t.Errorf("%s: %q, %v", uri, dsn, err)
		}
	}
	dsn, _, err := parseURI("sqlite:///a.db?_pragma=journal_mode(DELETE)&_txlock=deferred")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(strings.SplitN(dsn, "?", 2)[1])
	if strings.Contains(dsn, "WAL") || q.Get("_txlock") != "deferred" || len(q["_pragma"]) != 3 {
		t.Errorf("the URI's own settings are kept: %s", dsn)
	}
	if _, _, err := parseURI("mysql://h/db"); err == nil {
		t.Error("the SQLite sink took a mysql URI")
	}
}
