package redokit

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/redokit/redokit"

// layers reads the layer diagram of docs/DESIGN.md: the fenced block after
// the "<!-- layers:" marker, one layer per line, top first, packages before
// a "|". A pattern "p/..." matches p and every package below it.
func layers(path string) ([][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]string
	state := 0 // 0 before the marker, 1 before the fence, 2 inside
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.HasPrefix(line, "<!-- layers:"):
			state = 1
		case state == 1 && strings.HasPrefix(line, "```"):
			state = 2
		case state == 2 && strings.HasPrefix(line, "```"):
			return out, nil
		case state == 2:
			pkgs, _, ok := strings.Cut(line, "|")
			if !ok {
				return nil, fmt.Errorf("%s: layer line %q has no \"|\"", path, line)
			}
			out = append(out, strings.Fields(pkgs))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no layer diagram (a fenced block after \"<!-- layers:\")", path)
}

// layerOf is the index of the layer whose pattern matches pkg (a path
// relative to the module, "redokit" for the root), or -1.
func layerOf(ls [][]string, pkg string) int {
	for i, l := range ls {
		for _, p := range l {
			if p == pkg || strings.HasSuffix(p, "/...") && (pkg == strings.TrimSuffix(p, "/...") || strings.HasPrefix(pkg, strings.TrimSuffix(p, "..."))) {
				return i
			}
		}
	}
	return -1
}

// checkLayers returns every import of graph (package → its imports, module
// packages only, relative names) that runs up the layers, and every package
// the layers do not place.
func checkLayers(ls [][]string, graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		from := layerOf(ls, pkg)
		if from < 0 {
			bad = append(bad, fmt.Sprintf("package %s is not in the layer diagram", pkg))
			continue
		}
		for _, imp := range imports {
			if to := layerOf(ls, imp); to >= 0 && to < from {
				bad = append(bad, fmt.Sprintf("%s (layer %d: %s) imports %s (layer %d: %s), which is above it", pkg, from+1, strings.Join(ls[from], " "), imp, to+1, strings.Join(ls[to], " ")))
			}
		}
	}
	return bad
}

// coreOf names the part of the redo core that pkg belongs to ("writer" for
// writer/..., "reader", "gc"), or "".
func coreOf(pkg string) string {
	for _, c := range []string{"writer", "reader", "gc"} {
		if pkg == c || strings.HasPrefix(pkg, c+"/") {
			return c
		}
	}
	return ""
}

// checkCore returns every import between the three parts of the redo core,
// which share a layer but must not import each other: writer, reader and gc
// meet only in the bucket and in meta.
func checkCore(graph map[string][]string) []string {
	var bad []string
	for pkg, imports := range graph {
		from := coreOf(pkg)
		for _, imp := range imports {
			if to := coreOf(imp); from != "" && to != "" && to != from {
				bad = append(bad, fmt.Sprintf("%s imports %s: writer, reader and gc do not import each other", pkg, imp))
			}
		}
	}
	return bad
}

func rel(path string) string {
	if path == modulePath {
		return "redokit"
	}
	return strings.TrimPrefix(path, modulePath+"/")
}

// TestLayering holds the import graph to the diagram in docs/DESIGN.md.
func TestLayering(t *testing.T) {
	ls, err := layers("docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := rel(fields[0])
		graph[pkg] = nil
		for _, imp := range fields[1:] {
			if imp == modulePath || strings.HasPrefix(imp, modulePath+"/") {
				graph[pkg] = append(graph[pkg], rel(imp))
			}
		}
	}
	if len(graph) < 10 {
		t.Fatalf("go list saw %d packages: %q", len(graph), out)
	}
	for _, b := range append(checkLayers(ls, graph), checkCore(graph)...) {
		t.Error(b)
	}
	// internal/ holds only the bottom of the house and the chain rules;
	// harnesses such as the workload generator live in testkit/.
	internal := []string{"internal/layout", "internal/retry", "internal/chain"}
	for pkg := range graph {
		if strings.HasPrefix(pkg, "internal/") && !slices.Contains(internal, pkg) {
			t.Errorf("%s is in internal/, which holds only %s", pkg, strings.Join(internal, ", "))
		}
	}
	// The CLI and the examples build no keys: the layout is the Log's.
	for pkg, imports := range graph {
		if strings.HasPrefix(pkg, "cmd/") || strings.HasPrefix(pkg, "examples/") {
			for _, imp := range imports {
				if imp == "internal/layout" {
					t.Errorf("%s imports internal/layout: keys are redokit.Log's to build", pkg)
				}
			}
		}
	}
}

// TestLayeringCatchesAnUpwardImport: the check itself fails on an import
// that runs up (meta importing gc, as it once did) and on a package the
// diagram does not place.
func TestLayeringCatchesAnUpwardImport(t *testing.T) {
	ls, err := layers("docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	bad := checkLayers(ls, map[string][]string{"meta": {"blob", "gc"}, "gc": {"meta"}, "newpkg": nil, "apply/sqlite": {"apply"}})
	if len(bad) != 2 || !strings.Contains(strings.Join(bad, "\n"), "meta (layer") || !strings.Contains(strings.Join(bad, "\n"), "newpkg is not in") {
		t.Fatalf("check found %q, want meta → gc and newpkg", bad)
	}
	bad = checkCore(map[string][]string{"reader": {"writer", "meta"}, "writer/writermetrics": {"writer"}, "gc": {"meta"}})
	if len(bad) != 1 || !strings.Contains(bad[0], "reader imports writer") {
		t.Fatalf("core check found %q, want reader → writer only", bad)
	}
}
