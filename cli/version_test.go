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

// TestVersionWithoutVCSStamping: a devel build that recorded no commit
// (-buildvcs=false, a go run, a build outside the checkout) says so and how
// to get one (issue 29, item 7: it showed no commit and no reason); a
// release's version names its commit, so it says nothing more.
func TestVersionWithoutVCSStamping(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: modulePath, Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}}
	got := formatVersion("", info, true)
	if !strings.Contains(got, "no commit recorded") || !strings.Contains(got, "-buildvcs=true") || !strings.Contains(got, "cli.version=") {
		t.Errorf("devel build without VCS stamping: formatVersion = %q, want how to get a commit", got)
	}
	info.Settings = []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-06T09:00:00Z"}}
	if got := formatVersion("", info, true); !strings.Contains(got, "commit 0123456789ab of 2026-12-06T09:00:00Z") || strings.Contains(got, "no commit") {
		t.Errorf("devel build with VCS stamping: formatVersion = %q", got)
	}
	info.Main.Version, info.Settings = "v1.5.0", nil
	if got := formatVersion("", info, true); strings.Contains(got, "no commit") {
		t.Errorf("a release: formatVersion = %q, want no hint", got)
	}
}
