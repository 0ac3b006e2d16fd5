package driver_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob/driver"
)

func TestSplitBody(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body        string
		size, limit int64
		small       bool // the body comes back whole
		bad         bool // ErrInvalidArgument, from SplitBody or from reading rest
	}{
		{"empty known", "", 0, 4, true, false},
		{"empty unknown", "", -1, 4, true, false},
		{"small known", "abc", 3, 4, true, false},
		{"small unknown", "abc", -1, 4, true, false},
		{"at threshold unknown", "abcd", -1, 4, false, false},
		{"large known", "abcdef", 6, 4, false, false},
		{"large unknown", "abcdef", -1, 4, false, false},
		{"short below", "ab", 3, 4, false, true},
		{"long below", "abcd", 3, 4, false, true},
		{"short above", "abcde", 6, 4, false, true},
		{"long above", "abcdefg", 6, 4, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			small, rest, err := driver.SplitBody(strings.NewReader(tc.body), tc.size, tc.limit)
			if err == nil && (small == nil) == (rest == nil) {
				t.Fatalf("small %q, rest %v: want exactly one", small, rest)
			}
			var got []byte
			if err == nil && rest != nil {
				got, err = io.ReadAll(rest)
			} else {
				got = small
			}
			if tc.bad {
				if !errors.Is(err, driver.ErrInvalidArgument) {
					t.Fatalf("err %v, want ErrInvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (small != nil) != tc.small || !bytes.Equal(got, []byte(tc.body)) {
				t.Errorf("small %v, body %q; want small %v, body %q", small != nil, got, tc.small, tc.body)
			}
		})
	}
}
