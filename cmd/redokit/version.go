package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is stamped by a release build:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/redokit
//
// Without it, the version is the module's from the build info (set by
// "go install …@v1.2.3"), else "(devel)".
var version = ""

// versionString is what --version prints: the version, the VCS revision the
// binary was built from when Go recorded one, and the Go toolchain.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	return formatVersion(version, info, ok)
}

func formatVersion(stamped string, info *debug.BuildInfo, ok bool) string {
	v := stamped
	if v == "" && ok && info.Main.Version != "" {
		v = info.Main.Version
	}
	if v == "" {
		v = "(devel)"
	}
	if !ok {
		return v + " (no build information)"
	}
	var rev, when string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	var parts []string
	if rev != "" {
		c := "commit " + rev[:min(12, len(rev))]
		if dirty {
			c += " (modified)"
		}
		if when != "" {
			c += " of " + when
		}
		parts = append(parts, c)
	}
	parts = append(parts, info.GoVersion)
	return fmt.Sprintf("%s, %s", v, strings.Join(parts, ", "))
}
