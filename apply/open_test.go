package apply

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

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

// TestRegister: Open dispatches on the scheme, case-insensitively, and
// refuses a scheme nobody registered, naming those that are.
func TestRegister(t *testing.T) {
	var got string
	Register("Test-Sink", func(ctx context.Context, uri string, opts *SinkOptions) (Sink, error) {
		got = uri
		return nil, nil
	})
	if _, err := Open(context.Background(), "TEST-sink://u:p@h/x", nil); err != nil || got != "TEST-sink://u:p@h/x" {
		t.Errorf("Open: %v, the OpenFunc got %q", err, got)
	}
	if !slices.Contains(Schemes(), "test-sink") {
		t.Errorf("Schemes() = %v", Schemes())
	}
	for _, uri := range []string{"nosuch://u:s3cr3t@h/x", "no-scheme", ":x"} {
		_, err := Open(context.Background(), uri, nil)
		if !errors.Is(err, ErrBadURI) || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "test-sink") {
			t.Errorf("%q: %v", uri, err)
		}
	}
	// An OpenFunc that fails with its own nil pointer (as a sink
	// package's Open does) must not hand the caller a non-nil Sink.
	type fakeSink struct{ Sink }
	Register("test-typed-nil", func(context.Context, string, *SinkOptions) (Sink, error) {
		var s *fakeSink
		return s, errors.New("refused")
	})
	if s, err := Open(context.Background(), "test-typed-nil://h", nil); err == nil || s != nil {
		t.Errorf("a failed open: sink %#v (non-nil: %v), error %v", s, s != nil, err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Register of a scheme did not panic")
		}
	}()
	Register("test-sink", func(context.Context, string, *SinkOptions) (Sink, error) { return nil, nil })
}
