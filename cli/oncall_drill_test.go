package cli

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redokit/redokit"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
	"github.com/redokit/redokit/segment"
	"github.com/redokit/redokit/testkit/s3test"
	"github.com/redokit/redokit/testkit/testenv"
	"github.com/redokit/redokit/writer"
)

// The on-call drill (issue 29's acceptance): each procedure of
// docs/OPERATIONS.md is walked on a real bad state — a dead writer (a
// SIGKILLed 'redokit gen'), a full file system (a tmpfs the test mounts,
// filled by gen to ENOSPC), a damaged block (a byte flipped in a sealed
// segment), a removed bucket (deleted on the S3 emulator) and a checkpoint
// left behind after an apply. The commands are the document's own: every
// fenced block marked <!-- drill: NAME --> is run as written, by sh, with
// 'redokit' on the PATH (this test binary, see TestMain) and the variables
// its text names set; the test then checks that each did what the text
// says. A block the document marks and no scenario runs fails the drill,
// and so does a scenario whose block the document lost: the document and
// the drill cannot drift apart.

// drillStaleAfter is the default --stale-after the procedures rely on: a
// dead writer is removable once its state object is older.
const drillStaleAfter = defaultStaleAfter

// drillBlock is one marked block of OPERATIONS.md.
type drillBlock struct {
	name   string
	script string
	exit   int // the exit status the text promises (default 0)
}

var drillMarker = regexp.MustCompile(`^\s*<!-- drill: ([a-z0-9-]+)(?: exit=(\d+))? -->\s*$`)

// drillBlocks parses the marked blocks of docs/OPERATIONS.md: a marker line,
// then a ```sh fence, whose lines (less the fence's indent) are the script.
func drillBlocks(t *testing.T) map[string]drillBlock {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "OPERATIONS.md"))
	flipMust(t, err)
	lines := strings.Split(string(data), "\n")
	out := map[string]drillBlock{}
	for i := 0; i < len(lines); i++ {
		m := drillMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := drillBlock{name: m[1]}
		if m[2] != "" {
			b.exit, _ = strconv.Atoi(m[2])
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			t.Fatalf("OPERATIONS.md line %d: drill marker %q is not followed by a ```sh block", i+1, b.name)
		}
		indent := lines[i+1][:len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " "))]
		var script []string
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			script = append(script, strings.TrimPrefix(lines[j], indent))
		}
		if j == len(lines) {
			t.Fatalf("OPERATIONS.md line %d: drill block %q is not closed", i+2, b.name)
		}
		if _, dup := out[b.name]; dup {
			t.Fatalf("OPERATIONS.md: two drill blocks named %q", b.name)
		}
		b.script = strings.Join(script, "\n") + "\n"
		out[b.name] = b
		i = j
	}
	return out
}

// drill runs the document's blocks.
type drill struct {
	blocks map[string]drillBlock
	path   string // a directory holding the 'redokit' wrapper

	mu      sync.Mutex
	ran     map[string]bool
	owned   map[string]bool // blocks a scenario runs
	skipped map[string]bool // blocks of scenarios that did not run here (skipped, or left out by -run)
}

// newDrill parses the document and puts a 'redokit' on a PATH of its own:
// a wrapper that runs this test binary as the CLI.
func newDrill(t *testing.T) *drill {
	t.Helper()
	for _, tool := range []string{"sh", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Need(t, fmt.Sprintf("%s is not installed: the drill runs OPERATIONS.md's commands with it (scripts/test.sh installs jq)", tool))
		}
	}
	self, err := os.Executable()
	flipMust(t, err)
	dir := t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %s \"$@\"\n", tortureChildEnv, strconv.Quote(self))
	flipMust(t, os.WriteFile(filepath.Join(dir, "redokit"), []byte(wrapper), 0o755))
	return &drill{blocks: drillBlocks(t), path: dir, ran: map[string]bool{}, owned: map[string]bool{}, skipped: map[string]bool{}}
}

// drillRun is one run of a block.
type drillRun struct {
	stdout, stderr string
	vars           map[string]string // the shell variables asked for, as the block left them
}

// run runs block name as written with sh -eu, under the storage and log
// given (REDOKIT_STORAGE, REDOKIT_LOG) and the variables vars, and fails the
// test unless it exits as the document says. keep names shell variables
// the block sets that a later block uses.
func (d *drill) run(t *testing.T, name, storage, logID string, vars map[string]string, keep ...string) drillRun {
	t.Helper()
	b, ok := d.blocks[name]
	if !ok {
		t.Fatalf("OPERATIONS.md has no block marked <!-- drill: %s -->", name)
	}
	d.mu.Lock()
	d.ran[name] = true
	d.mu.Unlock()
	script := b.script
	varsFile := filepath.Join(t.TempDir(), "vars")
	if len(keep) > 0 {
		script += "set > " + strconv.Quote(varsFile) + "\n"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-eu", "-c", script)
	env := []string{"PATH=" + d.path + string(os.PathListSeparator) + os.Getenv("PATH"),
		"REDOKIT_STORAGE=" + storage, "REDOKIT_LOG=" + logID, "HOME=" + os.Getenv("HOME")}
	for _, kv := range os.Environ() {
		// The servers' settings (S3 endpoint, credentials) and CI.
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "CI=") || strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("drill block %s: %v", name, err)
	}
	transcript := fmt.Sprintf("drill block %s (exit %d):\n%s--- stdout\n%s--- stderr\n%s", name, code, b.script, stdout.String(), stderr.String())
	t.Log(transcript)
	if code != b.exit {
		t.Fatalf("OPERATIONS.md says block %s exits %d; it exited %d\n%s", name, b.exit, code, transcript)
	}
	r := drillRun{stdout: stdout.String(), stderr: stderr.String(), vars: map[string]string{}}
	if len(keep) > 0 {
		data, err := os.ReadFile(varsFile)
		flipMust(t, err)
		for _, line := range strings.Split(string(data), "\n") {
			for _, k := range keep {
				if v, ok := strings.CutPrefix(line, k+"="); ok {
					r.vars[k] = strings.Trim(v, "'")
				}
			}
		}
		for _, k := range keep {
			if r.vars[k] == "" {
				t.Fatalf("drill block %s left %s unset\n%s", name, k, transcript)
			}
		}
	}
	return r
}

// skip records that a scenario could not run here, so the check that every
// block was run passes over its blocks.
func (d *drill) skip(names ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range names {
		d.skipped[n] = true
	}
}

// scenario runs fn as a parallel subtest owning blocks: a subtest that
// skips marks them skipped.
func (d *drill) scenario(t *testing.T, name string, blocks []string, fn func(t *testing.T)) {
	d.mu.Lock()
	for _, b := range blocks {
		d.owned[b], d.skipped[b] = true, true // until the scenario starts
	}
	d.mu.Unlock()
	t.Run(name, func(t *testing.T) {
		d.mu.Lock()
		for _, b := range blocks {
			d.skipped[b] = false
		}
		d.mu.Unlock()
		t.Parallel()
		for _, b := range blocks {
			if _, ok := d.blocks[b]; !ok {
				t.Fatalf("OPERATIONS.md lost the block marked <!-- drill: %s --> that the %s scenario runs", b, name)
			}
		}
		t.Cleanup(func() {
			if t.Skipped() {
				d.skip(blocks...)
			}
		})
		fn(t)
	})
}

func TestOnCallDrill(t *testing.T) {
	d := newDrill(t)
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		for name := range d.blocks {
			switch {
			case !d.owned[name]:
				t.Errorf("OPERATIONS.md marks block %s for the drill, and no scenario runs it", name)
			case !d.ran[name] && !d.skipped[name]:
				t.Errorf("OPERATIONS.md's block %s was not run by the scenario that owns it", name)
			}
		}
	})
	d.scenario(t, "DeadWriter", []string{"dead-writer", "dead-writers"}, d.deadWriter)
	d.scenario(t, "StorageFull", []string{"storage-full-gc", "storage-full-room", "storage-full-collect", "storage-full-reserve", "storage-full-rm"}, d.storageFull)
	d.scenario(t, "DamagedBlock", []string{"damaged-find", "damaged-replay", "damaged-restore"}, d.damagedBlock)
	d.scenario(t, "MissingBucket", []string{"missing-bucket", "missing-bucket-restored"}, d.missingBucket)
	d.scenario(t, "StaleCheckpoint", []string{"stale-checkpoint", "stale-checkpoint-again"}, d.staleCheckpoint)
}

// drillLog is a log the drill looks at from Go, beside the commands.
type drillLog struct {
	storage, id string
	b           *blob.Bucket
	log         *redokit.Log
}

func openDrillLog(t *testing.T, storage, id string) *drillLog {
	t.Helper()
	u := storage
	if !strings.Contains(u, "://") {
		u = fileURL(u) // a local directory, as the CLI takes it
	}
	b, err := blob.Open(context.Background(), withCreateDir(u))
	flipMust(t, err)
	t.Cleanup(func() { b.Close() })
	log, err := redokit.Open(context.Background(), b, id)
	flipMust(t, err)
	return &drillLog{storage: storage, id: id, b: b, log: log}
}

func (l *drillLog) args(cmd ...string) []string {
	return append(cmd, "--storage", l.storage, "--log", l.id)
}

func (l *drillLog) meta(t *testing.T) *meta.Meta {
	t.Helper()
	m, err := l.log.Meta(context.Background())
	flipMust(t, err)
	return m
}

func (l *drillLog) states(t *testing.T) map[string]*meta.WriterState {
	t.Helper()
	st, err := l.log.WriterStates(context.Background())
	flipMust(t, err)
	return st
}

// segments lists the log's segment names.
func (l *drillLog) segments(t *testing.T) []segment.Name {
	t.Helper()
	var out []segment.Name
	for s, err := range l.log.Segments(context.Background()) {
		flipMust(t, err)
		out = append(out, s.Name)
	}
	return out
}

// startGen starts 'redokit gen' as a process of its own (this binary as the
// CLI), writing a long workload of two writers without DDLs after the first
// tables, so that it is still writing when the drill kills it.
func (d *drill) startGen(t *testing.T, storage, logID string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(d.path, "redokit"), "gen", "--storage", storage, "--log", logID, "--rows", "100000000",
		"--writers", "2", "--flush-interval", "50ms", "--segment-size", "65536", "--ddl-rate", "0", "--tables", "2", "--row-size", "2000")
	cmd.Env = append(os.Environ(), "REDOKIT_STORAGE=", "REDOKIT_LOG=")
	// gen's own messages, to explain a gen that stopped by itself.
	cmd.Stderr = &genOutput{}
	flipMust(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// genOutput is a buffer a process writes while the test may read it.
type genOutput struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *genOutput) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *genOutput) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// kill SIGKILLs gen, as a lost host would end it: its writers stay live.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// waitStale waits until every writer state of the log is older than the
// default --stale-after: what the procedures wait for before removing a
// dead writer.
func waitStale(t *testing.T, l *drillLog) {
	t.Helper()
	var newest time.Time
	for _, st := range l.states(t) {
		if st.Updated.After(newest) {
			newest = st.Updated
		}
	}
	time.Sleep(time.Until(newest.Add(drillStaleAfter + 500*time.Millisecond)))
}

// takeOver is the CDC system moving the dead writers' work to a new writer,
// w3, in this process: it writes a few rows above every ts the dead
// writers made durable (their fences included) and publishes them. It
// returns the writer and the ts it published as flushed.
func takeOver(t *testing.T, l *drillLog, coord *meta.Coordinator, above uint64) (*writer.Writer, uint64) {
	t.Helper()
	ctx := context.Background()
	flipMust(t, coord.AddWriter(ctx, "w3"))
	w, err := l.log.OpenWriter(ctx, "w3", &writer.Options{FlushInterval: time.Hour, PublishInterval: time.Hour})
	flipMust(t, err)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	flipMust(t, w.AddSpan(100, above))
	r := rand.New(rand.NewPCG(above, 3))
	to := above + 5<<18
	for i := uint64(1); i <= 5; i++ {
		flipMust(t, w.Write(ctx, 100, flipRow(r, 100, above+i<<18, int64(i))))
	}
	flipMust(t, w.AdvanceResolved(100, to))
	_, err = w.Flush(ctx)
	flipMust(t, err)
	_, err = w.Publish(ctx)
	flipMust(t, err)
	return w, to
}

// fenceTop is the highest ts the fences of the writers' epoch-1 chains
// reach (their chain max and committed ts): a checkpoint above it lets GC
// take those epochs whole.
func fenceTop(t *testing.T, st *meta.WriterState) uint64 {
	t.Helper()
	for _, f := range st.Fences {
		if f.Epoch == 1 {
			return max(f.MaxTs, f.CommittedTs)
		}
	}
	return st.FlushedTs
}

// deadWriter: "A dead writer" on a gen killed with SIGKILL. Its writers w1
// and w2 stay live and pin the global resolved ts; another writer (the CDC
// system's new owner of their spans) runs past them. writer rm fences each
// and removes it from the live writers: the next tick moves the global
// resolved ts to the live writer's; once the checkpoint passes their
// fences, gc deletes their epochs whole, their .active segments too, and
// the log still verifies.
func (d *drill) deadWriter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openDrillLog(t, dir, "dead")
	gen := d.startGen(t, dir, "dead")
	testenv.WaitFor(t, "gen's writers to publish", func() bool {
		st, err := l.log.WriterStates(ctx)
		return err == nil && len(st) == 2 && st["w1"].FlushedTs > 0 && st["w2"].FlushedTs > 0 && st["w1"].HasSeq && st["w2"].HasSeq
	})
	time.Sleep(300 * time.Millisecond)
	kill(t, gen)
	before := l.states(t)
	coord, err := l.log.OpenCoordinator(ctx, nil)
	flipMust(t, err)
	m, err := coord.Tick(ctx)
	flipMust(t, err)
	pinned := m.ResolvedTs
	// Stale first: the new owner of their spans, w3, publishes just before
	// the procedure, as a live writer does.
	waitStale(t, l)
	// Above what they published by an hour of TSO: the fences writer rm
	// takes are where their durable progress ends, past their last
	// publication by up to a publish interval of gen's (fast) clock.
	published := max(before["w1"].FlushedTs, before["w2"].FlushedTs, before["w1"].ChainMaxTs, before["w2"].ChainMaxTs)
	_, to := takeOver(t, l, coord, published+3600_000<<18)
	if m, err = coord.Tick(ctx); err != nil || m.ResolvedTs != pinned {
		t.Fatalf("with w1 and w2 dead and live, a tick should keep the global resolved ts at %d; got %+v, %v", pinned, m, err)
	}

	r := d.run(t, "dead-writer", dir, "dead", map[string]string{"W": "w1"})
	if !regexp.MustCompile(`(?m)^w1\s+1\s+\d+\s+\S+\s+yes\s+yes$`).MatchString(r.stdout) {
		t.Fatalf("writer ls should show w1 at epoch 1, STALE yes, LIVE yes:\n%s", r.stdout)
	}
	mustContain(t, "writer rm", r.stdout, "writer w1 of log dead fenced: epoch 1 → 2", "removed from the live writers")
	d.run(t, "dead-writers", dir, "dead", nil)
	after, mm := l.states(t), l.meta(t)
	for _, id := range []string{"w1", "w2"} {
		st := after[id]
		if _, live := mm.Writers[id]; live || st.Epoch != 2 || len(st.Fences) != 1 || st.Fences[0].Epoch != 1 || st.FlushedTs < before[id].FlushedTs {
			t.Fatalf("after the procedure %s should be fenced at epoch 2 (its durable progress kept) and not live: %+v, live writers %v", id, st, mm.Writers)
		}
	}
	if _, live := mm.Writers["w3"]; !live {
		t.Fatalf("the procedure removed the live writer w3: %v", mm.Writers)
	}
	// "the global resolved ts stops waiting for it at the coordinator's next tick"
	if m, err = coord.Tick(ctx); err != nil || m.ResolvedTs != to {
		t.Fatalf("after writer rm, a tick should move the global resolved ts to w3's %d; got %+v, %v", to, m, err)
	}
	// "GC collects them by the fence: the whole fenced epoch, its unsealed
	// .active segment too, once the checkpoint is above the fence's ts"
	hadActive := false
	for _, n := range l.segments(t) {
		hadActive = hadActive || n.Active && n.WriterID != "w3"
	}
	if !hadActive {
		t.Fatalf("gen killed with SIGKILL left no .active segment: the drill proves nothing about them")
	}
	top := max(fenceTop(t, after["w1"]), fenceTop(t, after["w2"]))
	if top >= to {
		t.Fatalf("the dead writers' fences reach %d, not below w3's %d", top, to)
	}
	wantCode(t, cli(t, l.args("checkpoint", "set", "--yes", strconv.FormatUint(to, 10))...), 0)
	r2 := cli(t, l.args("gc", "--yes")...)
	wantCode(t, r2, 0)
	for _, n := range l.segments(t) {
		if n.WriterID != "w3" {
			t.Fatalf("gc below %d (above the fences, at most %d) left %s of a fenced epoch\n%s", to, top, n.Format(), r2.stdout)
		}
	}
	wantCode(t, cli(t, l.args("verify")...), 0)
}

// mountTmpfs mounts a tmpfs of size at a new directory, for the test's
// life. It needs root: when not root or when the kernel refuses, it skips
// saying why, or fails under CI=true (testenv.Need).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Need(t, "mounting a small tmpfs to fill needs root")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		testenv.Need(t, fmt.Sprintf("mount -t tmpfs -o size=%s tmpfs %s: %v: %s", size, dir, err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// freeBytes is what the file system of path has free for a user.
func freeBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	flipMust(t, syscall.Statfs(path, &st))
	return int64(st.Bavail) * int64(st.Bsize)
}

// fill writes a file at path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	flipMust(t, err)
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			return
		}
	}
}

// storageFull: "Storage full" on an 8 MiB tmpfs that a SIGKILLed gen
// filled, with a reserve file beside the log. Writes fail naming the full
// store; gc runs, writing nothing; with the reserve gone, writer rm fences
// the dead writers; after the CDC system's new writer passes them, the
// checkpoint moves and gc frees their epochs, .active segments included;
// the reserve comes back; and rm removes a log on a file system filled
// again.
func (d *drill) storageFull(t *testing.T) {
	ctx := context.Background()
	if _, err := exec.LookPath("fallocate"); err != nil {
		testenv.Need(t, "fallocate is not installed (util-linux): Storage full's last step runs it")
	}
	mnt := mountTmpfs(t, "8m")
	reserve := filepath.Join(mnt, "redo.reserve")
	flipMust(t, os.WriteFile(reserve, make([]byte, 512<<10), 0o644))
	store := filepath.Join(mnt, "redo")
	l := openDrillLog(t, store, "full")
	gen := d.startGen(t, store, "full")
	started := time.Now()
	for freeBytes(t, mnt) > 0 && time.Since(started) < 45*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	if freeBytes(t, mnt) > 0 {
		t.Fatalf("gen did not fill the file system in 45s; its stderr:\n%s", gen.Stderr.(*genOutput).String())
	}
	t.Logf("gen filled the file system in %v", time.Since(started).Round(time.Millisecond))
	kill(t, gen)
	vars := map[string]string{"RESERVE": reserve, "RESERVE_SIZE": "512K"}

	// "every command that writes an object fails, naming the full store"
	resolved := strconv.FormatUint(l.meta(t).ResolvedTs, 10)
	r := cli(t, l.args("checkpoint", "set", "--yes", resolved)...)
	wantCode(t, r, 1)
	mustContain(t, "checkpoint set on a full store", r.stderr, "the store is full", "redokit gc --yes", "Storage full", "no space left on device")

	// 1. gc writes nothing: it runs on the full store, and keeps the dead
	// writers' .active segments.
	r2 := d.run(t, "storage-full-gc", store, "full", vars)
	mustContain(t, "gc on a full store", r2.stdout, "active (unsealed) kept", "checkpoint ts")
	if free := freeBytes(t, mnt); free > 64<<10 {
		t.Fatalf("gc on a full store with the checkpoint at the start freed %d bytes: the drill's state is not the one the procedure is for", free)
	}
	// "Commands that only read (meta, ls, writer ls, verify, dump, apply
	// from the log) work."
	for _, args := range [][]string{{"ls"}, {"writer", "ls"}, {"verify"}, {"dump", "--limit", "3"},
		{"apply", "--sink", "sqlite://" + filepath.Join(t.TempDir(), "down.db")}} {
		wantCode(t, cli(t, l.args(args...)...), 0)
	}

	// 2. The reserve makes room; the dead writers are fenced and removed.
	waitStale(t, l)
	d.run(t, "storage-full-room", store, "full", vars)
	if _, err := os.Stat(reserve); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the reserve is still there: %v", err)
	}
	states, m := l.states(t), l.meta(t)
	for _, id := range []string{"w1", "w2"} {
		if _, live := m.Writers[id]; live || states[id].Epoch != 2 {
			t.Fatalf("after storage-full-room %s should be fenced and not live: %+v", id, states[id])
		}
	}

	// 3. The CDC system runs on (a new owner of the spans), the checkpoint
	// moves to what it holds, gc frees the dead writers' epochs.
	coord, err := l.log.OpenCoordinator(ctx, nil)
	flipMust(t, err)
	top := max(fenceTop(t, states["w1"]), fenceTop(t, states["w2"]))
	w3, to := takeOver(t, l, coord, top)
	ticked, err := coord.Tick(ctx)
	flipMust(t, err)
	if ticked.ResolvedTs != to {
		t.Fatalf("with w1 and w2 removed, a tick should move the global resolved ts to w3's %d, got %d", to, ticked.ResolvedTs)
	}
	before := freeBytes(t, mnt)
	d.run(t, "storage-full-collect", store, "full", map[string]string{"TS": strconv.FormatUint(to, 10)})
	for _, n := range l.segments(t) {
		if n.WriterID != "w3" {
			t.Fatalf("gc at checkpoint %d, above the fences (%d), left %s", to, top, n.Format())
		}
	}
	if free := freeBytes(t, mnt); free < before+4<<20 {
		t.Fatalf("gc freed %d bytes, want the dead writers' epochs (several MiB)", free-before)
	}
	wantCode(t, cli(t, l.args("verify")...), 0)

	// 4. The reserve comes back.
	d.run(t, "storage-full-reserve", store, "full", vars)
	if fi, err := os.Stat(reserve); err != nil || fi.Size() != 512<<10 {
		t.Fatalf("the reserve after storage-full-reserve: %v, %v", fi, err)
	}

	// The changefeed is gone: its writers stop, the disk fills again, and
	// rm removes the log, full store or not.
	flipMust(t, w3.Close(ctx))
	flipMust(t, coord.RemoveWriter(ctx, "w3"))
	fill(t, filepath.Join(mnt, "filler"))
	r3 := d.run(t, "storage-full-rm", store, "full", nil)
	mustContain(t, "rm on a full store", r3.stdout, "deleted log full")
	objects, _, err := l.log.Size(ctx)
	if err != nil || objects != 0 {
		t.Fatalf("after rm on a full store the log has %d objects (%v)", objects, err)
	}
}

// damagedBlock: "A damaged block" on a log of sealed segments, one byte of
// a block flipped, with a backup of the directory taken before. Step 1
// finds the lowest damaged ts, step 2 replays everything below it (the
// downstream then holds what a replay of the undamaged log to there
// gives), step 3 restores the object from the backup and replays the rest:
// the downstream holds the whole log.
func (d *drill) damagedBlock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "redo")
	writeTSOLog(t, dir, "dmg", 200, true)
	backup := filepath.Join(t.TempDir(), "backup")
	if out, err := exec.Command("cp", "-a", dir, backup).CombinedOutput(); err != nil {
		t.Fatalf("back up %s: %v: %s", dir, err, out)
	}
	files := segmentFiles(t, dir)
	path := files[len(files)/2]
	data, err := os.ReadFile(path)
	flipMust(t, err)
	sr, err := segment.NewReader(bytes.NewReader(data), int64(len(data)), nil)
	flipMust(t, err)
	bi := sr.Footer().Blocks[1]
	flipBlock(t, path, bi)
	sinkPath := filepath.Join(t.TempDir(), "down.db")
	vars := map[string]string{"SINK": "sqlite://" + sinkPath, "BACKUP": backup}

	r := d.run(t, "damaged-find", dir, "dmg", vars, "MIN")
	key, err := filepath.Rel(dir, path)
	flipMust(t, err)
	mustContain(t, "damaged-find", r.stdout, fmt.Sprintf("%s %d %d %d", key, bi.Offset, bi.MinTs, bi.MaxTs))
	if r.vars["MIN"] != strconv.FormatUint(bi.MinTs, 10) {
		t.Fatalf("damaged-find set MIN=%q, want the damaged block's min ts %d", r.vars["MIN"], bi.MinTs)
	}
	vars["MIN"] = r.vars["MIN"]

	d.run(t, "damaged-replay", dir, "dmg", vars)
	ref := filepath.Join(t.TempDir(), "ref.db")
	wantCode(t, cli(t, "apply", "--storage", backup, "--log", "dmg", "--sink", "sqlite://"+ref, "--end-ts", strconv.FormatUint(bi.MinTs-1, 10)), 0)
	if got, want := sqliteRows(t, sinkPath), sqliteRows(t, ref); got != want || want == "" {
		t.Fatalf("after damaged-replay the downstream holds\n%s\nwant what the undamaged log holds below %d:\n%s", got, bi.MinTs, want)
	}

	d.run(t, "damaged-restore", dir, "dmg", vars)
	full := filepath.Join(t.TempDir(), "full.db")
	wantCode(t, cli(t, "apply", "--storage", backup, "--log", "dmg", "--sink", "sqlite://"+full), 0)
	if got, want := sqliteRows(t, sinkPath), sqliteRows(t, full); got != want {
		t.Fatalf("after damaged-restore the downstream holds\n%s\nwant the whole log:\n%s", got, want)
	}
}

// sqliteRows is every row of every table of a SQLite downstream but the
// progress table, sorted: what two downstreams are compared by.
func sqliteRows(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	flipMust(t, err)
	defer db.Close()
	tables, err := queryStrings(context.Background(), db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'redokit_%' ORDER BY name`)
	flipMust(t, err)
	var out []string
	for _, tb := range tables {
		rows, err := db.Query(fmt.Sprintf("SELECT * FROM %q", tb))
		flipMust(t, err)
		cols, err := rows.Columns()
		flipMust(t, err)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			flipMust(t, rows.Scan(ptrs...))
			out = append(out, fmt.Sprintf("%s %v", tb, vals))
		}
		flipMust(t, rows.Err())
		rows.Close()
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// missingBucket: "A missing bucket" on the S3 emulator. A log is written,
// its objects saved, the bucket deleted: meta fails naming the bucket's
// error, not a missing log. The bucket recreated and the objects copied
// back, verify proves them and meta reads the log as it was.
func (d *drill) missingBucket(t *testing.T) {
	ctx := context.Background()
	store := s3Storage(t)
	genLog(t, store, "gone", "--writers", "2")
	l := openDrillLog(t, store, "gone")
	before := l.meta(t)
	saved := map[string][]byte{}
	for a, err := range l.b.List(ctx, "") {
		flipMust(t, err)
		rd, err := l.b.NewReader(ctx, a.Key)
		flipMust(t, err)
		var buf bytes.Buffer
		_, err = buf.ReadFrom(rd)
		rd.Close()
		flipMust(t, err)
		saved[a.Key] = buf.Bytes()
	}
	bucket, c := s3test.BucketOf(t, store)
	for k := range saved {
		flipMust(t, l.b.Delete(ctx, k))
	}
	s3test.DeleteBucket(t, c, bucket)

	r := d.run(t, "missing-bucket", store, "gone", nil)
	if !strings.Contains(r.stderr, "NoSuchBucket") || !strings.Contains(r.stderr, "missing bucket") || strings.Contains(r.stderr, "no log") {
		t.Fatalf("meta in a deleted bucket should name NoSuchBucket and a missing bucket, never \"no log\":\n%s", r.stderr)
	}

	s3test.CreateBucket(t, c, bucket)
	for k, v := range saved {
		_, err := l.b.Put(ctx, k, v, nil)
		flipMust(t, err)
	}
	r = d.run(t, "missing-bucket-restored", store, "gone", nil)
	mustContain(t, "meta of the restored log", r.stdout, strconv.FormatUint(before.ResolvedTs, 10), strconv.FormatUint(before.CheckpointTs, 10))
}

// staleCheckpoint: "A checkpoint left behind": a log applied into SQLite
// without its checkpoint moved. The procedure sets the checkpoint to the
// ts the downstream holds (the global resolved ts) and gc collects below
// it; the log still verifies and replays from there.
func (d *drill) staleCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "redo")
	l := writeTSOLog(t, dir, "stale", 200, true)
	sinkPath := filepath.Join(t.TempDir(), "down.db")
	sink := "sqlite://" + sinkPath
	wantCode(t, cli(t, l.args("apply", "--sink", sink)...), 0)
	if cp := l.checkpointTs(t); cp != l.start {
		t.Fatalf("the checkpoint moved to %d by itself", cp)
	}
	dl := openDrillLog(t, dir, "stale")
	segsBefore := len(dl.segments(t))

	r := d.run(t, "stale-checkpoint", dir, "stale", map[string]string{"SINK": sink})
	if cp := l.checkpointTs(t); cp != tsoResolved {
		t.Fatalf("after stale-checkpoint the checkpoint is %d, want the global resolved ts %d that the downstream holds", cp, tsoResolved)
	}
	left := dl.segments(t)
	if len(left) >= segsBefore {
		t.Fatalf("gc deleted nothing: %d segments before, %d after\n%s", segsBefore, len(left), r.stdout)
	}
	for _, n := range left {
		// One writer's chain of sealed segments: everything wholly below
		// the checkpoint is the chain's bottom, and goes.
		if !n.Active && n.MaxTs < tsoResolved {
			t.Fatalf("gc left %s, wholly below the checkpoint %d", n.Format(), tsoResolved)
		}
	}
	wantCode(t, cli(t, l.args("verify")...), 0)
	// "Run again once the checkpoint is at the global resolved ts, the
	// block changes nothing."
	r2 := d.run(t, "stale-checkpoint-again", dir, "stale", map[string]string{"SINK": sink})
	mustContain(t, "stale-checkpoint run again", r2.stderr, "the range is empty", `checkpoint set "null"`)
	if cp := l.checkpointTs(t); cp != tsoResolved {
		t.Fatalf("the procedure run again moved the checkpoint to %d", cp)
	}
}
