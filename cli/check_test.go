package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob"
)

// TestCheckOffersNoSettleTime: check cannot be told that a store's listings
// lag, so it never offers the redo rules on such a store (the redo suite
// refuses a harness with a settle time): no flag of check is about a settle
// time, a made-up one is refused as unknown, and the harness check runs the
// suites on declares none.
func TestCheckOffersNoSettleTime(t *testing.T) {
	a := newApp(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	cmd := a.checkCmd()
	usage := cmd.Flags().FlagUsages() + cmd.InheritedFlags().FlagUsages()
	if !strings.Contains(usage, "--redo") {
		t.Fatalf("the flags of check, as listed:\n%s", usage)
	}
	for _, line := range strings.Split(usage, "\n") {
		for _, w := range []string{"settle", "consisten", "lag", "eventual"} {
			if strings.Contains(strings.ToLower(line), w) {
				t.Errorf("check has a flag about %q: %s; the redo rules must not be offered on a store declared with a settle time", w, strings.TrimSpace(line))
			}
		}
	}

	r := cli(t, "check", "--storage", memName(t), "--redo", "--list-settle", "1s")
	wantCode(t, r, exitUsage)
	mustContain(t, "check --list-settle", r.stderr, "unknown flag")

	b, err := blob.Open(context.Background(), memName(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if h := checkHarness(b, "scratch/", &checkOptions{largeSize: 1 << 20, timeout: 1}); h.ListSettle != 0 {
		t.Fatalf("check's harness declares ListSettle %v", h.ListSettle)
	}
}

// TestCheckConsistencyRules: check runs the read-after-write rules, and says
// what a redo log needs each for.
func TestCheckConsistencyRules(t *testing.T) {
	r := cli(t, "check", "--storage", memName(t), "--run", "^(ListAfterWrite|ReadAfterWrite)$", "--json")
	wantCode(t, r, 0)
	out, ran := checkRows(t, r.stdout)
	want := "Plain/ListAfterWrite Plain/ReadAfterWrite Prefixed/ListAfterWrite Prefixed/ReadAfterWrite cleanup"
	if !out.OK || strings.Join(ran, " ") != want {
		t.Fatalf("check --run the read-after-write rules: ok %v, ran %v, want %s", out.OK, ran, want)
	}
	for _, rule := range []string{"ListAfterWrite", "ReadAfterWrite"} {
		if ruleWhy[rule] == "" {
			t.Errorf("check does not say what a redo log needs %s for", rule)
		}
	}
}

// TestCheckRunGivesNoVerdict: the rules selected by --run passing is no
// verdict on the whole bucket, and check does not print one (issue 29, item
// 7: it said "is fit to hold a redo log" after one rule).
func TestCheckRunGivesNoVerdict(t *testing.T) {
	store := memName(t)
	r := cli(t, "check", "--storage", store, "--run", "^RoundTrip$")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "is fit to hold a redo log") {
		t.Fatalf("check --run printed a verdict on the bucket:\n%s", r.stdout)
	}
	mustContain(t, "check --run", r.stdout, `the rules selected by --run "^RoundTrip$" pass`, "without --run for a verdict")

	r = cli(t, "check", "--storage", store, "--run", "^RoundTrip$", "--json")
	wantCode(t, r, 0)
	var out struct {
		OK  bool   `json:"ok"`
		Run string `json:"run"`
	}
	decodeJSON(t, r.stdout, &out)
	if !out.OK || out.Run != "^RoundTrip$" {
		t.Fatalf("check --run --json: ok %v, run %q; want the selection named", out.OK, out.Run)
	}
}
