package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStorageShownUnescaped: the storage URL is shown as a person reads it,
// its path unescaped (issue 29, item 7: "file:///tmp/my%20dir%20%C3%A9"),
// and the URL shown is one --storage takes back.
func TestStorageShownUnescaped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my dir é")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "gen", "--storage", dir, "--log", "u", "--rows", "10")
	wantCode(t, r, 0)
	shown := "file://" + dir
	mustContain(t, "gen", r.stdout, "u in "+shown+"\n")
	r = cli(t, "meta", "--storage", dir, "--log", "nolog")
	wantCode(t, r, 1)
	mustContain(t, "meta of a missing log", r.stderr, " in "+shown+":")
	if strings.Contains(r.stdout+r.stderr, "%20") {
		t.Fatalf("a percent-encoded URL shown:\n%s", r)
	}
	r = cli(t, "meta", "--storage", shown, "--log", "u")
	wantCode(t, r, 0)

	for in, want := range map[string]string{
		"s3://u:xxxxx@b/p%20q?region=x%20y": "s3://u:xxxxx@b/p q?region=x%20y",
		"file:///a%23b":                     "file:///a%23b", // "#" would end the path
		"file:///a%3Fb":                     "file:///a%3Fb",
		"s3://b/a%2Fb":                      "s3://b/a%2Fb", // a slash inside a segment
		"file:///a%0Ab":                     "file:///a%0Ab",
		"mem://":                            "mem://",
	} {
		if got := unescapedURL(in); got != want {
			t.Errorf("unescapedURL(%q) = %q, want %q", in, got, want)
		}
	}
}
