package apply

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
)

const secret = "s3cr3t"

func TestBadURIs(t *testing.T) {
	for _, uri := range []string{
		"",
		"localhost:3306",
		"postgres://u:s3cr3t@h/db",
		"mysql://u:s3cr3t@h:notaport/db",
		"mysql://u:s3cr3t@/db",
		"mysql://u:s3cr3t@h/db/extra",
		"mysql://u:s3cr3t@h/db?timeout=xyz",
		"mysql://u:s3cr3t%zz@h/db",
		"mysql://u:s3/cr3t@h/db",
		"mysql:opaque",
		"sqlite://host/x.db",
		"sqlite:",
		"sqlite:///dir/",
		"sqlite:///:memory:",
		"sqlite://u:s3cr3t@/x.db",
		"sqlite:///x.db?_pragma=%zz",
	} {
		_, err := Open(context.Background(), uri, nil)
		if !errors.Is(err, ErrBadURI) {
			t.Errorf("%q: err = %v, want ErrBadURI", uri, err)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "cr3t") {
			t.Errorf("%q: the error shows the password: %v", uri, err)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"mysql://u:p@h/db":          "mysql://u:xxxxx@h/db",
		"mysql://u@h/db":            "mysql://u@h/db",
		"mysql://u:p@h:bad/db":      "mysql://u:xxxxx@h:bad/db",
		"mysql://u:p/q@r@h/db?x=1":  "mysql://u:xxxxx@h/db?x=1",
		"sqlite:///tmp/a.db":        "sqlite:///tmp/a.db",
		"no scheme:with@at":         "no scheme:with@at",
		"mysql://u:p%zz@h/db":       "mysql://u:xxxxx@h/db",
		"mysql://h/db?password=x@y": "mysql://h/db?password=x@y",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseURI(t *testing.T) {
	tg, err := parseSinkURI("mysql://u:p%40ss@db.example:3307/shop?timeout=5s&sql_mode=%27ANSI%27")
	if err != nil {
		t.Fatal(err)
	}
	c := tg.mysql
	if tg.dialect != MySQL || c.User != "u" || c.Passwd != "p@ss" || c.Addr != "db.example:3307" || c.DBName != "shop" ||
		!c.InterpolateParams || c.Params["time_zone"] != "'+00:00'" || c.Params["sql_mode"] != "'ANSI'" || c.Timeout.Seconds() != 5 {
		t.Errorf("parsed %+v", c)
	}
	if strings.Contains(tg.redacted, "p@ss") || strings.Contains(tg.redacted, "p%40ss") {
		t.Errorf("redacted %q", tg.redacted)
	}
	tg, err = parseSinkURI("mariadb://[::1]?interpolateParams=false&time_zone=%27%2B08%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	if c := tg.mysql; c.User != "root" || c.Addr != "[::1]:3306" || c.DBName != "" || c.InterpolateParams || c.Params["time_zone"] != "'+08:00'" {
		t.Errorf("parsed %+v", c)
	}
	for uri, want := range map[string]string{
		"sqlite:///tmp/a b.db": "file:/tmp/a%20b.db?",
		"sqlite:rel/a.db":      "file:rel/a.db?",
	} {
		tg, err := parseSinkURI(uri)
		if err != nil || tg.dialect != SQLite || !strings.HasPrefix(tg.sqlite, want) || !strings.Contains(tg.sqlite, "journal_mode%28WAL%29") {
			t.Errorf("%s: %+v, %v", uri, tg, err)
		}
	}
	tg, err = parseSinkURI("sqlite:///a.db?_pragma=journal_mode(DELETE)&_txlock=deferred")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := url.ParseQuery(strings.SplitN(tg.sqlite, "?", 2)[1])
	if strings.Contains(tg.sqlite, "WAL") || q.Get("_txlock") != "deferred" || len(q["_pragma"]) != 3 {
		t.Errorf("the URI's own settings are kept: %s", tg.sqlite)
	}
}

// TestConnectErrorsHidePassword: failures to connect name the sink without
// its password.
func TestConnectErrorsHidePassword(t *testing.T) {
	uris := []string{"mysql://root:" + secret + "@127.0.0.1:1/db?timeout=2s"}
	if dsn := mysqlDSNOrEmpty(); dsn != "" {
		// The test server's root has no password: any password is refused.
		uris = append(uris, "mysql://root:"+secret+"@"+dsn+"/db")
	}
	for _, uri := range uris {
		_, err := Open(context.Background(), uri, nil)
		if err == nil {
			t.Errorf("%s: no error", Redact(uri))
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("the error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("the error does not name the sink: %v", err)
		}
	}
	// A directory that does not exist cannot hold the file.
	_, err := Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"), nil)
	if err == nil {
		t.Error("sqlite in a missing directory: no error")
	}
}
