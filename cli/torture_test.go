package cli

import (
	"cmp"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/conformance/torture"
	"github.com/redokit/redokit/testkit/testenv"
)

// tortureJSON is what torture --json prints.
type tortureJSON struct {
	Verdict string   `json:"verdict"`
	Rules   []string `json:"broken_rules"`
	Prefix  string   `json:"scratch_prefix"`
	Mode    string   `json:"mode"`
	Counts  torture.Counts
	Acked   int64               `json:"acked_events"`
	Viol    []torture.Violation `json:"violations"`
	Stale   int                 `json:"stale_serves"`
	Faults  string              `json:"faults"`
	Quota   int64               `json:"memory_quota"`
}

// tortureRun runs torture --json on storage and decodes its verdict. The
// run lasts REDOKIT_TORTURE_DURATION (default 1.5 s). A run that passes
// without having checked anything (on a loaded machine, writer processes
// can be killed by the schedule before their first flush) is run again for
// twice as long, up to three times: a short run proves nothing either way,
// while any violation ends the test at once.
func tortureRun(t *testing.T, storage string, extra ...string) (result, tortureJSON) {
	t.Helper()
	d, err := time.ParseDuration(cmp.Or(os.Getenv("REDOKIT_TORTURE_DURATION"), "1500ms"))
	if err != nil {
		t.Fatalf("REDOKIT_TORTURE_DURATION: %v", err)
	}
	for attempt := 1; ; attempt++ {
		r := cli(t, append([]string{"torture", "--storage", storage, "--json", "--seed", "7", "--duration", d.String()}, extra...)...)
		var v tortureJSON
		if r.code == 0 || r.code == 1 {
			decodeJSON(t, r.stdout, &v)
		}
		if attempt == 3 || r.code != 0 || v.Verdict != "PASS" || v.Counts.Flushes > 0 && v.Counts.Reads > 0 {
			return r, v
		}
		t.Logf("a run of %v passed having checked nothing (%d flushes, %d whole reads, %d kills); running again for %v", d, v.Counts.Flushes, v.Counts.Reads, v.Counts.Kills, 2*d)
		d *= 2
	}
}

// wantPass requires a PASS, and that the scratch prefix is gone.
func wantPass(t *testing.T, b *blob.Bucket, r result, v tortureJSON) {
	t.Helper()
	wantCode(t, r, 0)
	t.Logf("%s: %d acknowledged events above the final checkpoint read back; %+v", v.Verdict, v.Acked, v.Counts)
	if v.Verdict != "PASS" || v.Counts.Flushes == 0 || v.Counts.Reads == 0 {
		t.Fatalf("verdict %s, %d flushes acknowledged, %d whole reads: want a PASS that checked something\n%s", v.Verdict, v.Counts.Flushes, v.Counts.Reads, r)
	}
	if b != nil {
		for a, err := range b.List(context.Background(), "") {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(a.Key, "redokit-torture-") {
				t.Fatalf("the scratch prefix is left: %s", a.Key)
			}
		}
	}
}

func TestTortureUsage(t *testing.T) {
	for _, args := range [][]string{
		{"torture", "--storage", t.TempDir(), "--duration", "0s"},
		{"torture", "--storage", t.TempDir(), "--writers", "0"},
		{"torture", "--storage", t.TempDir(), "--broken", "nonsense"},
		{"torture", "--storage", t.TempDir(), "--quota", "-1"},
		{"torture", "--duration", "1s"},
	} {
		wantCode(t, cli(t, args...), 2)
	}
}

// TestTortureLocal: writer processes killed with SIGKILL on local disk.
func TestTortureLocal(t *testing.T) {
	dir := t.TempDir()
	r, v := tortureRun(t, dir, "--writers", "2")
	b, err := blob.Open(t.Context(), fileURL(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wantPass(t, b, r, v)
	if !strings.Contains(v.Mode, "SIGKILL") || v.Counts.Kills == 0 {
		t.Fatalf("mode %q, %d kills: want writer processes killed", v.Mode, v.Counts.Kills)
	}
}

// TestTortureMem: mem:// is process-local, so its writers run in-process.
func TestTortureMem(t *testing.T) {
	r, v := tortureRun(t, memName(t))
	wantPass(t, nil, r, v)
	if !strings.Contains(v.Mode, "in-process") {
		t.Fatalf("mode %q: want in-process writers on mem://", v.Mode)
	}
}

// TestTortureStaged: with --quota the writers stage (a memory quota the
// workload fills, and lagging spans): writer processes killed with SIGKILL
// on local disk, in-process writers on mem. The run must pass having made
// stage cuts, counted from the writer processes' histories too; a run that
// staged nothing fails the test. The text verdict says what was staged.
func TestTortureStaged(t *testing.T) {
	quota := strconv.Itoa(torture.StageQuota)
	for _, c := range []struct{ name, storage string }{
		{"local", t.TempDir()},
		{"mem", memName(t)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, v := tortureRun(t, c.storage, "--writers", "2", "--quota", quota)
			wantPass(t, nil, r, v)
			if v.Counts.StageCuts == 0 || v.Counts.StagedEvents == 0 {
				t.Fatalf("--quota %s: %d stage cuts, %d staged events: want the writers to stage\n%s", quota, v.Counts.StageCuts, v.Counts.StagedEvents, r)
			}
			if v.Quota != torture.StageQuota {
				t.Fatalf("the report's memory quota is %d, want %s", v.Quota, quota)
			}
			t.Logf("%d stage cuts staged %d events, %d writes over the quota, %d events above fenced epochs' committed ts left out",
				v.Counts.StageCuts, v.Counts.StagedEvents, v.Counts.QuotaOvercommits, v.Counts.Uncommitted)
		})
	}
	// The text output says what was staged.
	r := cli(t, "torture", "--storage", memName(t), "--seed", "7", "--duration", "1s", "--quota", quota)
	wantCode(t, r, 0)
	mustContain(t, "torture --quota", r.stdout, "PASS seed 7: ", "; memory quota "+quota+" bytes: ", " stage cuts staged ")
	if strings.Contains(r.stdout, "NOTHING STAGED") {
		t.Fatalf("nothing was staged:\n%s", r.stdout)
	}
}

// TestTortureBroken: a store that skips objects in listings, or reports
// success for writes it did not store, fails the run naming a rule; the
// scratch prefix is removed all the same.
func TestTortureBroken(t *testing.T) {
	// Writer processes on local disk lose appended bytes; on mem (in-process
	// writers) listings leave out a recent segment of every writer, which no
	// reader can find by probing past what it listed.
	for _, c := range []struct{ mode, storage string }{
		{"misreport-lost", t.TempDir()},
		{"list-skip", memName(t)},
	} {
		t.Run(c.mode, func(t *testing.T) {
			r, v := tortureRun(t, c.storage, "--broken", c.mode)
			wantCode(t, r, 1)
			if v.Verdict != "FAIL" || len(v.Rules) == 0 {
				t.Fatalf("verdict %s, rules %v: want a FAIL naming rules\n%s", v.Verdict, v.Rules, r)
			}
			t.Logf("broken rules: %v; first: %s", v.Rules, v.Viol[0])
			if !strings.HasPrefix(c.storage, "mem://") {
				entries, _ := os.ReadDir(c.storage)
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), "redokit-torture-") {
						t.Fatalf("the scratch prefix is left after a FAIL: %s", e.Name())
					}
				}
			}
			// The text verdict names the rule too.
			r = cli(t, "torture", "--storage", c.storage, "--seed", "7", "--duration", "1s", "--broken", c.mode)
			wantCode(t, r, 1)
			mustContain(t, "torture", r.stdout, "FAIL seed 7: ", "VIOLATION ")
		})
	}
}

// TestTortureBrokenStale: a store whose stats and reads of the meta object
// and the writer states answer older versions (blobtest.BrokenStale:
// consistent windows, the old ETag with its old body, and torn ones, the
// current ETag with an old body; in the final check too) fails the run
// naming the rules that caught it, with the stale serves counted. Before
// issue 25 the coordinator wrote back what it derived from an old meta
// object (watermark-monotonic, checkpoint-monotonic), a writer took an
// epoch again from an old state (epoch-unique) and reads came back short;
// with the generations, what is caught is an error matching meta.ErrStale,
// and a store that goes on serving old versions fails the final reads or
// the coordinator's settling all the same.
func TestTortureBrokenStale(t *testing.T) {
	r, v := tortureRun(t, memName(t), "--broken", "stale-meta")
	wantCode(t, r, 1)
	if v.Verdict != "FAIL" || len(v.Rules) == 0 {
		t.Fatalf("verdict %s, rules %v: want a FAIL naming rules\n%s", v.Verdict, v.Rules, r)
	}
	if v.Stale == 0 {
		t.Fatalf("no stale serves counted (faults: %s): the run did not test what it says", v.Faults)
	}
	t.Logf("broken rules: %v; %d stale serves, %d operations failed with meta.ErrStale, %d spans added, %d opens; first: %s",
		v.Rules, v.Stale, v.Counts.StaleCaught, v.Counts.SpansAdded, v.Counts.Opens, v.Viol[0])
	r = cli(t, "torture", "--storage", memName(t), "--seed", "7", "--duration", "1s", "--broken", "stale-meta")
	wantCode(t, r, 1)
	mustContain(t, "torture", r.stdout, "FAIL seed 7: ", "VIOLATION ", "stale-window")
}

func TestTortureOnS3(t *testing.T) {
	st := s3Storage(t)
	r, v := tortureRun(t, st)
	wantPass(t, nil, r, v)
}

func TestTortureOnGCS(t *testing.T) {
	needServer(t, "STORAGE_EMULATOR_HOST")
	c, err := storage.NewClient(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bucket := testenv.UniqueName("redokit-torture-")
	if err := c.Bucket(bucket).Create(t.Context(), "redokit-test", nil); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
	r, v := tortureRun(t, "gs://"+bucket+"/redo")
	wantPass(t, nil, r, v)
}

func TestTortureOnAzure(t *testing.T) {
	cs := needServer(t, "AZURE_STORAGE_CONNECTION_STRING")
	c, err := azblob.NewClientFromConnectionString(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	container := testenv.UniqueName("redokit-torture-")
	if _, err := c.CreateContainer(t.Context(), container, nil); err != nil {
		t.Fatalf("create container %s: %v", container, err)
	}
	r, v := tortureRun(t, "azblob://"+container+"/redo")
	wantPass(t, nil, r, v)
	if key := os.Getenv("AZURE_STORAGE_KEY"); key != "" && strings.Contains(r.stdout+r.stderr, key) {
		t.Fatal("the account key was printed")
	}
}
