package cli

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRangeSteps(t *testing.T) {
	if got := rangeSteps(100, 200, 150); got != rangeBarSteps/2 {
		t.Fatalf("rangeSteps(100, 200, 150) = %d", got)
	}
	if rangeSteps(100, 200, 50) != 0 || rangeSteps(100, 200, 300) != rangeBarSteps || rangeSteps(5, 5, 5) != 0 {
		t.Fatal("rangeSteps out of its range")
	}
}

// TestBarRateCountsFromTheStart: a bar's rate counts the time from its
// creation, where the work starts, not from its first Add (issue 29, item 7:
// verify's first sample read 1.3 TB/s, a segment over microseconds).
func TestBarRateCountsFromTheStart(t *testing.T) {
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errb)
	on := true
	a.progressTTY = &on
	bar := a.bar(100<<20, "verifying", true)
	time.Sleep(200 * time.Millisecond) // the first segment's work
	_ = bar.Add64(1 << 20)
	m := regexp.MustCompile(`, ([\d.]+) ([kMGT]?B)/s\)`).FindStringSubmatch(errb.String())
	if m == nil {
		t.Fatalf("no rate on the bar: %q", errb.String())
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	// 1 MiB over at least 200 ms is at most 5.2 MB/s.
	if unit := map[string]float64{"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[m[2]]; v*unit > 6e6 {
		t.Fatalf("the bar's first rate is %s %s/s, want at most 5.2 MB/s:\n%q", m[1], m[2], errb.String())
	}
}
