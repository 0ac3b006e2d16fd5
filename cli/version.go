package cli

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// version is stamped by a release build:
//
//	go build -ldflags "-X github.com/redokit/redokit/cli.version=v1.2.3" ./cmd/redokit
//
// Without it, the version is redokit's module's from the build info (set by
// "go install …@v1.2.3", or, in a binary of another module that calls Main,
// the redokit version that module requires), else "(devel)".
var version = ""

// modulePath is redokit's module, whose version --version names.
const modulePath = "github.com/redokit/redokit"

// versionString is what --version prints: the version, the VCS revision the
// binary was built from when Go recorded one, and the Go toolchain.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	return formatVersion(version, info, ok)
}

func formatVersion(stamped string, info *debug.BuildInfo, ok bool) string {
	v := stamped
	if v == "" && ok {
		v = info.Main.Version
		if info.Main.Path != modulePath {
			// A backend author's binary: its main module is theirs, and
			// what --version must name is the redokit it was built with.
			v = ""
			for _, d := range info.Deps {
				if d.Path == modulePath {
					v = d.Version
					if d.Replace != nil {
						v = strings.TrimSpace(v + " (replaced by " + strings.TrimSpace(d.Replace.Path+" "+d.Replace.Version) + ")")
					}
				}
			}
			if v != "" {
				v += " in " + info.Main.Path
			}
		}
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
	} else if !strings.HasPrefix(v, "v") {
		// A release names its commit by its version; a devel build
		// without VCS stamping (go build -buildvcs=false, a build outside
		// the checkout, a go run) names nothing, so say how to get it.
		parts = append(parts, "no commit recorded (build in a git checkout of redokit with -buildvcs=true, or stamp -ldflags \"-X "+modulePath+"/cli.version=…\")")
	}
	parts = append(parts, info.GoVersion)
	return fmt.Sprintf("%s, %s", v, strings.Join(parts, ", "))
}
