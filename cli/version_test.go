package cli

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionOfAnOutsideBuild: in a binary of a backend author's module
// that calls Main, --version names the redokit module it was built with,
// not the author's module's version.
func TestVersionOfAnOutsideBuild(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.26.0",
		Main:      debug.Module{Path: "example.com/mystore/cmd/redokit", Version: "v9.9.9"},
		Deps: []*debug.Module{
			{Path: "example.com/other", Version: "v1.0.0"},
			{Path: modulePath, Version: "v1.4.2"},
		},
	}
	got := formatVersion("", info, true)
	if !strings.HasPrefix(got, "v1.4.2 in example.com/mystore/cmd/redokit, ") || strings.Contains(got, "v9.9.9") {
		t.Errorf("formatVersion = %q, want redokit's v1.4.2 in the author's module", got)
	}
	info.Main = debug.Module{Path: modulePath, Version: "v1.5.0"}
	if got := formatVersion("", info, true); !strings.HasPrefix(got, "v1.5.0, ") {
		t.Errorf("redokit's own build: formatVersion = %q, want v1.5.0 first", got)
	}
	if got := formatVersion("v2.0.0", info, true); !strings.HasPrefix(got, "v2.0.0, ") {
		t.Errorf("a stamped version: formatVersion = %q, want v2.0.0 first", got)
	}
}
