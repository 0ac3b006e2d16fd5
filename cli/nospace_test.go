//go:build linux

package cli

import (
	"strings"
	"testing"
)

// TestNoSpaceIsNotUnknown: a full store's error says the store is full and
// what works on one, not that the store failed in an "unknown" way (issue 29,
// item 7: ENOSPC read "blob: put …: unknown: … no space left on device"), in
// every command, gen's too, and in the --json error object.
func TestNoSpaceIsNotUnknown(t *testing.T) {
	store, d := newFullStore(t)
	genLog(t, store, "full")
	d.set(true, false)
	for _, args := range [][]string{
		{"checkpoint", "set", "--storage", store, "--log", "full", "--yes", "--force", "1"},
		{"gen", "--storage", store, "--log", "new", "--rows", "10"},
		{"gen", "--storage", store, "--log", "new2", "--rows", "10", "--json"},
	} {
		r := cli(t, args...)
		wantCode(t, r, 1)
		mustContain(t, args[0]+" on a full store", r.stderr, "no space left on device", "the store is full", "Storage full")
		if strings.Contains(r.stderr+r.stdout, "unknown") {
			t.Errorf("%s on a full store calls it unknown:\n%s", args[0], r)
		}
		if strings.Contains(strings.Join(args, " "), "--json") {
			var e jsonError
			decodeJSON(t, r.stdout, &e)
			if e.ExitCode != 1 || !strings.Contains(e.Error, "the store is full") {
				t.Errorf("--json error on a full store: %+v", e)
			}
		}
	}
}
