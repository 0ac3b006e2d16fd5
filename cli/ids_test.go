package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/redokit/redokit/segment"
)

// TestInvalidIDMessages: an ID the log refuses is a usage error that quotes
// the character at fault whole, a multi-byte rune too (issue 29, item 7: one
// byte of it was quoted), and says why "." and ".." are refused (no reason was
// given).
func TestInvalidIDMessages(t *testing.T) {
	cases := []struct {
		id   string
		want []string
	}{
		{"caf\u00e9", []string{`'é' (U+00E9) at byte 3`, "allowed: A-Z a-z 0-9 . _ -"}},
		{"a\u65e5b", []string{`'日' (U+65E5) at byte 1`}},
		{"a/b", []string{`'/' (U+002F) at byte 1`}},
		{"x\xffy", []string{"the byte 0xff, not UTF-8, at byte 1"}},
		{".", []string{"own or parent directory", "outside the store"}},
		{"..", []string{"own or parent directory"}},
	}
	for _, c := range cases {
		err := checkID(c.id)
		if !errors.Is(err, segment.ErrInvalidName) {
			t.Fatalf("checkID(%q) = %v, want segment.ErrInvalidName", c.id, err)
		}
		mustContain(t, "checkID("+c.id+")", err.Error(), c.want...)
		if strings.ContainsRune(err.Error(), '\u00c3') {
			t.Errorf("checkID(%q) quotes half a rune: %v", c.id, err)
		}
		for _, args := range [][]string{{"meta", "--storage", t.TempDir(), "--log", c.id}, {"writer", "rm", c.id, "--storage", t.TempDir(), "--log", "x"}} {
			r := cli(t, args...)
			wantCode(t, r, 2)
			mustContain(t, strings.Join(args[:2], " "), r.stderr, c.want...)
		}
	}
	for _, id := range []string{"cf1", "a.b_c-D9"} {
		if err := checkID(id); err != nil {
			t.Errorf("checkID(%q) = %v", id, err)
		}
	}
	if err := checkID(strings.Repeat("a", segment.MaxIDLen+1)); !errors.Is(err, segment.ErrInvalidName) || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a long ID: %v", err)
	}
}
