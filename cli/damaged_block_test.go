package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redokit/redokit/segment"
)

// A damaged block is named by its key, its offset and the commit-ts range it
// held, by verify (text and --json), apply and dump; a replay that ends
// below the range does not read it and succeeds (issue 29, item 6;
// OPERATIONS.md, "A damaged block").

// flipBlock flips a byte of the payload of the block bi of the segment file
// path.
func flipBlock(t *testing.T, path string, bi segment.BlockInfo) {
	t.Helper()
	data, err := os.ReadFile(path)
	flipMust(t, err)
	off := bi.Offset + segment.BlockHeaderSize + int64(bi.Length-segment.BlockHeaderSize)/2
	data[off] ^= 0xff
	flipMust(t, os.WriteFile(path, data, 0o644))
}

// checkDamagedBlock runs verify, apply and dump on l, whose block at offset
// off of the segment key is damaged and held commit ts in [lo, hi]
// (rangeText says so as the messages do), then an apply up to lo - 1.
func checkDamagedBlock(t *testing.T, l *tsoLog, key string, off int64, lo, hi uint64, rangeText string) {
	t.Helper()
	at := fmt.Sprintf("at offset %d", off)

	r := cli(t, l.args("verify")...)
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "corrupt", key, fmt.Sprintf(" %d ", off), rangeText, "FAILED")

	r = cli(t, l.args("verify", "--json")...)
	wantCode(t, r, 1)
	checkTsStrings(t, "verify --json", r.stdout)
	var rep struct {
		Problems []problemJSON `json:"problems"`
	}
	decodeJSON(t, r.stdout, &rep)
	if len(rep.Problems) == 0 {
		t.Fatalf("verify --json found no problem:\n%s", r.stdout)
	}
	p := rep.Problems[0]
	if p.Kind != "corrupt" || p.Key != key || p.Offset != off || p.MinTs != fmt.Sprint(lo) || p.MaxTs != fmt.Sprint(hi) ||
		!strings.Contains(p.Detail, rangeText) {
		t.Fatalf("verify --json: want a corrupt block at %s offset %d holding [%d, %d], got %+v", key, off, lo, hi, p)
	}

	sink := "sqlite://" + filepath.Join(t.TempDir(), "down.db")
	for _, cmd := range [][]string{{"apply", "--sink", sink}, {"dump"}} {
		r = cli(t, l.args(cmd...)...)
		wantCode(t, r, 1)
		mustContain(t, cmd[0]+" stderr", r.stderr, fmt.Sprintf("%q", key), "corrupt block "+at, rangeText, "A damaged block")
	}

	// With --json the failed apply's summary (where it stopped) stands in
	// for the error object, exit_code included (issue 29, item 7: it had
	// none).
	r = cli(t, l.args("apply", "--sink", "sqlite://"+filepath.Join(t.TempDir(), "json.db"), "--json")...)
	wantCode(t, r, 1)
	var failed struct {
		Applied  *appliedJSON `json:"applied"`
		Error    string       `json:"error"`
		ExitCode int          `json:"exit_code"`
	}
	decodeJSON(t, r.stdout, &failed)
	if failed.Applied == nil || !strings.Contains(failed.Error, "corrupt block "+at) || failed.ExitCode != 1 {
		t.Fatalf("apply --json over a damaged block: want the summary with the error and exit_code 1, got\n%s", r.stdout)
	}

	// The runbook: everything below the range replays.
	end := fmt.Sprint(lo - 1)
	r = cli(t, l.args("apply", "--sink", sink, "--end-ts", end, "--json")...)
	wantCode(t, r, 0)
	checkTsStrings(t, "apply --json", r.stdout)
	var sum applySummary
	decodeJSON(t, r.stdout, &sum)
	// (The failed apply above applied what came before the damage, the
	// DDL at least: this one skips that.)
	if sum.EndTs != lo-1 || sum.Rows == 0 || sum.DDLs+sum.Skipped == 0 || sum.Error != "" {
		t.Fatalf("apply --end-ts %s: want rows applied up to %s, got %+v", end, end, sum)
	}
	r = cli(t, l.args("dump", "--end-ts", end)...)
	wantCode(t, r, 0)
	if n := strings.Count(r.stdout, "\n"); int64(n) != sum.Events {
		t.Fatalf("dump --end-ts %s printed %d events, apply applied %d", end, n, sum.Events)
	}
}

func TestDamagedBlockSealed(t *testing.T) {
	l := writeTSOLog(t, t.TempDir(), "sealed", 200, true)
	files := segmentFiles(t, l.dir)
	if len(files) < 4 {
		t.Fatalf("want several sealed segments, got %v", files)
	}
	// A segment in the middle, a block with blocks on both sides.
	path := files[len(files)/2]
	data, err := os.ReadFile(path)
	flipMust(t, err)
	sr, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), nil)
	flipMust(t, err)
	blocks := sr.Footer().Blocks
	if len(blocks) < 3 {
		t.Fatalf("%s has %d blocks, want 3 or more", path, len(blocks))
	}
	bi := blocks[1]
	flipBlock(t, path, bi)
	key, err := filepath.Rel(l.dir, path)
	flipMust(t, err)
	checkDamagedBlock(t, l, key, bi.Offset, bi.MinTs, bi.MaxTs,
		fmt.Sprintf("the block holds commit ts [%d, %d] (the footer's index)", bi.MinTs, bi.MaxTs))
}

func TestDamagedBlockActive(t *testing.T) {
	l := writeTSOLog(t, t.TempDir(), "active", 200, false)
	var path string
	for _, f := range allSegmentFiles(t, l.dir) {
		if strings.HasSuffix(f, segment.ActiveExt) {
			path = f
		}
	}
	if path == "" {
		t.Fatalf("no active segment under %s", l.dir)
	}
	data, err := os.ReadFile(path)
	flipMust(t, err)
	rec, err := segment.Recover(bytes.NewReader(data), nil)
	flipMust(t, err)
	blocks := rec.Blocks
	if len(blocks) < 6 || len(rec.Progress) == 0 {
		t.Fatalf("%s has %d blocks and %d progress frames, want more", path, len(blocks), len(rec.Progress))
	}
	// A block with whole blocks on both sides: they bound its range, the
	// max ts of the one before and the min ts of the one after (past a
	// progress frame, when one follows it).
	k := len(blocks) / 2
	for ; k < len(blocks)-1; k++ {
		if blocks[k+1].Offset != blocks[k].End() {
			break // a progress frame between k and k+1
		}
	}
	if k == len(blocks)-1 {
		k = len(blocks) / 2
	}
	flipBlock(t, path, blocks[k])
	key, err := filepath.Rel(l.dir, path)
	flipMust(t, err)
	lo, hi := blocks[k-1].MaxTs, blocks[k+1].MinTs
	checkDamagedBlock(t, l, key, blocks[k].Offset, lo, hi,
		fmt.Sprintf("the block holds commit ts in [%d, %d] (the max ts of the block before it, the min ts of the block after it)", lo, hi))
}

// allSegmentFiles lists every segment file under a local root, active ones
// too.
func allSegmentFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, segment.SealedExt) || strings.HasSuffix(p, segment.ActiveExt) {
			out = append(out, p)
		}
		return nil
	})
	flipMust(t, err)
	return out
}
