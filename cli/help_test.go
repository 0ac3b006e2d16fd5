package cli

import (
	"os"
	"strings"
	"testing"
)

// TestHelpTexts: the help says what the commands do (issue 29, item 7: the
// help omitted PostgreSQL and bench, verify --help the chain check, and gc
// --help and the README described GC differently).
func TestHelpTexts(t *testing.T) {
	r := cli(t, "--help")
	wantCode(t, r, 0)
	mustContain(t, "redokit --help", r.stdout, "PostgreSQL", "redokit bench", "  bench ")

	r = cli(t, "verify", "--help")
	wantCode(t, r, 0)
	mustContain(t, "verify --help", r.stdout, "chain of segments complete", "incomplete", "not a key the log writes")

	// gc: the help and the README's row say the same rules.
	r = cli(t, "gc", "--help")
	wantCode(t, r, 0)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for line := range strings.Lines(string(readme)) {
		if strings.HasPrefix(line, "| `gc [") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("README.md has no gc row")
	}
	help := strings.Join(strings.Fields(r.stdout), " ")
	for _, rule := range []struct{ help, readme string }{
		{"the bottom of its chain of sealed segments", "from the bottom of each writer epoch's chain up"},
		{"below the checkpoint", "below the checkpoint"},
		{"a zombie's segments", "a zombie's segments"},
		{"a fenced epoch's whole chain, its unsealed (.active) segment too", "a fenced epoch's whole chain below the checkpoint, its unsealed segment too"},
		{"gc writes nothing", "writes nothing"},
		{"asks before deleting (or needs --yes", "(asks, or `--yes`)"},
	} {
		if !strings.Contains(help, rule.help) || !strings.Contains(row, rule.readme) {
			t.Errorf("gc --help and README's gc row differ on %q / %q:\n%s\n%s", rule.help, rule.readme, help, row)
		}
	}
}

// TestDashboardTsScale: the dashboard turns commit ts into seconds by its
// ts_per_second variable, TiDB's TSO scale by default, and no panel assumes
// TSOs by a constant (issue 29, item 7: the watermark-age panel did).
func TestDashboardTsScale(t *testing.T) {
	raw, err := os.ReadFile("../docs/grafana/redokit-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name    string `json:"name"`
				Current struct {
					Value string `json:"value"`
				} `json:"current"`
			} `json:"list"`
		} `json:"templating"`
	}
	decodeJSON(t, string(raw), &d)
	def := ""
	for _, v := range d.Templating.List {
		if v.Name == "ts_per_second" {
			def = v.Current.Value
		}
	}
	if def != "262144000" {
		t.Fatalf("the dashboard's ts_per_second variable: default %q, want 262144000 (TiDB TSOs)", def)
	}
	scaled := 0
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			if strings.Contains(q.Expr, "262144000") {
				t.Errorf("panel %q assumes TSOs by a constant: %s", p.Title, q.Expr)
			}
			if strings.Contains(q.Expr, "$ts_per_second") {
				scaled++
				if !strings.Contains(p.Description, "ts_per_second") {
					t.Errorf("panel %q scales by ts_per_second without saying so", p.Title)
				}
			}
		}
	}
	if scaled == 0 {
		t.Fatal("no panel scales commit ts by ts_per_second")
	}
}
