package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestBench(t *testing.T) {
	type out struct {
		Storage string        `json:"storage"`
		Figures []benchFigure `json:"figures"`
	}
	figures := func(t *testing.T, r result) map[string]benchFigure {
		t.Helper()
		wantCode(t, r, 0)
		var o out
		decodeJSON(t, r.stdout, &o)
		m := map[string]benchFigure{}
		for _, f := range o.Figures {
			m[f.Name] = f
			if len(f.Samples) != 2 || f.Min > f.Median || f.Median > f.Max {
				t.Errorf("figure %q: %+v, want 2 samples and min ≤ median ≤ max", f.Name, f)
			}
		}
		for _, name := range []string{"write rows/s", "write payload MiB/s", "read (merge, decoded) rows/s", "lz4 compress MiB/s (1 thread)"} {
			if m[name].Median <= 0 {
				t.Errorf("figure %q is missing or not positive: %+v", name, m[name])
			}
		}
		return m
	}

	t.Run("Local", func(t *testing.T) {
		dir := t.TempDir()
		// Something of the user's beside the scratch prefix: bench must
		// leave it alone and remove only its own objects.
		if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		m := figures(t, cli(t, "bench", "--storage", dir, "--seconds", "200ms", "--reps", "2", "--json"))
		if m["writer payload ÷ raw append"].Median <= 0 || m["raw append MiB/s (same bytes, same syncs)"].Median <= 0 {
			t.Errorf("a local disk needs the raw append baseline: %+v", m)
		}
		if _, ok := m["raw PUT MiB/s (objects of the mean segment size)"]; ok {
			t.Errorf("a local disk got a raw PUT baseline")
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name() != "keep.txt" && e.Name() != ".redokit" {
				t.Errorf("bench left %s behind", e.Name())
			}
		}
		if b, err := os.ReadFile(filepath.Join(dir, "keep.txt")); err != nil || string(b) != "mine" {
			t.Errorf("keep.txt: %q, %v", b, err)
		}
	})
	t.Run("ObjectStore", func(t *testing.T) {
		m := figures(t, cli(t, "bench", "--storage", "mem://", "--seconds", "200ms", "--reps", "2", "--compression", "none", "--json"))
		if m["writer stored ÷ raw PUT"].Median <= 0 {
			t.Errorf("an object store needs the raw PUT baseline: %+v", m)
		}
		if r := m["compression ratio"]; r.Median > 1.01 {
			t.Errorf("compression none: ratio %v", r.Median)
		}
	})
	t.Run("Table", func(t *testing.T) {
		r := cli(t, "bench", "--seconds", "100ms", "--reps", "1", "--dir", t.TempDir())
		wantCode(t, r, 0)
		mustContain(t, "stdout", r.stdout, "a temporary directory", "write rows/s", "writer payload ÷ raw append", "MIN – MAX")
	})
	// At --rate the writers write that many rows/s, not flat out, and the
	// flush figures say at what rate they were measured (issue 29, item 7:
	// OPERATIONS.md offered bench "to measure your store at your interval",
	// but it only wrote flat out).
	t.Run("Rate", func(t *testing.T) {
		const rate = 4000
		r := cli(t, "bench", "--storage", "mem://", "--seconds", "500ms", "--reps", "2", "--rate", "4000", "--flush-interval", "50ms", "--json")
		m := figures(t, r)
		if got := m["write rows/s"].Median; got < rate/2 || got > rate*1.1 {
			t.Errorf("--rate %d: wrote %.0f rows/s", rate, got)
		}
		if _, ok := m["flush p50 ms (at 4000 rows/s)"]; !ok {
			t.Errorf("no flush p50 figure named for the rate: %v", m)
		}
		var o struct {
			Rate float64 `json:"rate_rows_s"`
		}
		decodeJSON(t, r.stdout, &o)
		if o.Rate != rate {
			t.Errorf("rate_rows_s %v, want %d", o.Rate, rate)
		}
	})
	t.Run("Usage", func(t *testing.T) {
		for _, args := range [][]string{
			{"--compression", "zstd"}, {"--seconds", "0s"}, {"--writers", "0"}, {"--reps", "0"}, {"--row-size", "10"}, {"--rate", "-1"},
		} {
			r := cli(t, append([]string{"bench"}, args...)...)
			wantCode(t, r, 2)
			mustContain(t, "stderr", r.stderr, args[0])
		}
	})
}
