package sqlsink_test

import (
	"context"
	"errors"
	"github.com/redokit/redokit/apply"
	"path/filepath"
	"strings"
	"testing"
)

const secret = "s3cr3t"

func TestBadURIs(t *testing.T) {
	for _, uri := range []string{
		"",
		"localhost:3306",
		"oracle://u:s3cr3t@h/db",
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
		_, err := apply.Open(context.Background(), uri, nil)
		if !errors.Is(err, apply.ErrBadURI) {
			t.Errorf("%q: err = %v, want apply.ErrBadURI", uri, err)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "cr3t") {
			t.Errorf("%q: the error shows the password: %v", uri, err)
		}
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
		_, err := apply.Open(context.Background(), uri, nil)
		if err == nil {
			t.Errorf("%s: no error", apply.Redact(uri))
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
	_, err := apply.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"), nil)
	if err == nil {
		t.Error("sqlite in a missing directory: no error")
	}
}
