package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
)

func TestMain(m *testing.M) {
	// redokit torture re-executes this binary as its writer processes.
	if os.Getenv(tortureChildEnv) == "1" {
		os.Exit(Run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// The environment must not choose a storage or a log for the tests.
	os.Unsetenv("REDOKIT_STORAGE")
	os.Unsetenv("REDOKIT_LOG")
	os.Exit(m.Run())
}

// result is one in-process run of the CLI.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// cli runs the CLI with args, as the binary would, but in-process: stdin is
// not a terminal, nor are stdout and stderr.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	return cliIn(t, "", nil, args...)
}

// cliIn runs the CLI with stdin and, when interactive is set, pretends
// stdin is a terminal so prompts are asked.
func cliIn(t *testing.T, stdin string, interactive *bool, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(stdin), &out, &errb)
	a.interactive = interactive
	code := a.execute(context.Background(), args)
	return result{out.String(), errb.String(), code}
}

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got:\n%s", code, r)
	}
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Fatalf("%s does not contain %q:\n%s", what, sub, s)
		}
	}
}

func decodeJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON (%v):\n%s", err, s)
	}
}

func fileURL(dir string) string { return (&url.URL{Scheme: "file", Path: dir}).String() }

// memName returns a fresh name for a mem:// store shared by every Open in
// this process (so one command writes what the next one reads). It is new
// on every call, so -count=N runs do not meet the previous run's log.
func memName(t *testing.T) string {
	var r [4]byte
	_, _ = rand.Read(r[:])
	return "mem://" + strings.NewReplacer("/", "-", "_", "-").Replace(strings.ToLower(t.Name())) + "-" + hex.EncodeToString(r[:])
}

// genLog writes a small generated log and returns its storage URL.
func genLog(t *testing.T, storage, log string, extra ...string) {
	t.Helper()
	args := append([]string{"gen", "--storage", storage, "--log", log, "--rows", "1500", "--ddl-rate", "0.02",
		"--flush-interval", "20ms", "--segment-size", "65536"}, extra...)
	r := cli(t, args...)
	wantCode(t, r, 0)
}

// segmentFiles lists the sealed segment files under a local root.
func segmentFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".seg") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// brokenDriver is an object store that ignores IfNotExist, as a store that
// silently drops If-None-Match would: two writers could both "create" the
// same lease. check must catch it.
type brokenDriver struct{ *mem.Driver }

func (d brokenDriver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	opts.IfNotExist = false
	return d.Driver.Put(ctx, key, r, size, opts)
}

// Close keeps the store: every Open of broken:// sees the same objects, so
// the test can look at what check left behind.
func (d brokenDriver) Close() error { return nil }

var brokenStore struct {
	sync.Mutex
	d *mem.Driver
}

func init() {
	blob.Register("broken", func(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
		brokenStore.Lock()
		defer brokenStore.Unlock()
		if brokenStore.d == nil {
			brokenStore.d = mem.NewDriver()
		}
		return blob.NewBucket(brokenDriver{brokenStore.d}), nil
	})
}
