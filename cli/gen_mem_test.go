package cli

import "testing"

// gen on mem:// writes a log no later command can read: it says so on
// stderr (issue 29, item 7: it was silent), and still runs.
func TestGenOnMemSaysTheLogVanishes(t *testing.T) {
	r := cli(t, "gen", "--storage", "mem://", "--log", "x", "--rows", "10")
	wantCode(t, r, 0)
	mustContain(t, "gen stderr", r.stderr, "mem:// lives only in this process", "--storage a directory")
	r = cli(t, "gen", "--storage", t.TempDir(), "--log", "x", "--rows", "10")
	wantCode(t, r, 0)
	if r.stderr != "" {
		t.Errorf("gen on a directory wrote to stderr: %q", r.stderr)
	}
}
