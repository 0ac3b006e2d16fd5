package blob_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
)

func TestValidateKey(t *testing.T) {
	good := []string{"a", "a/b", "a-b.c_d", "ünïcødé/键", "with space", "a/.hidden", "x..y", strings.Repeat("k", blob.MaxKeyLen)}
	for _, k := range good {
		if err := blob.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	bad := []string{"", "/abs", "a/", "a//b", "./a", "a/./b", "../a", "a/../b", "a/..", "nul\x00byte", "tab\tkey", "\xff\xfe", strings.Repeat("k", blob.MaxKeyLen+1)}
	for _, k := range bad {
		err := blob.ValidateKey(k)
		if !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

func TestBucketRejectsBadKeysBeforeTheDriver(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	if _, err := b.Put(ctx, "../escape", []byte("x"), nil); !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), "../escape") {
		t.Fatalf("Put(../escape) = %v, want ErrInvalidKey naming the key", err)
	}
	if b.Stats().Puts != 0 {
		t.Fatalf("driver was called for an invalid key: %+v", b.Stats())
	}
	if _, err := b.ReadAll(ctx, "a//b"); !errors.Is(err, blob.ErrInvalidKey) {
		t.Fatalf("ReadAll(a//b) = %v, want ErrInvalidKey", err)
	}
	if err := b.Delete(ctx, "ok", "bad/"); !errors.Is(err, blob.ErrInvalidKey) {
		t.Fatalf("Delete with one bad key = %v, want ErrInvalidKey", err)
	}
	if _, err := b.NewRangeReader(ctx, "k", -1, 2); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("negative offset = %v, want ErrInvalidArgument", err)
	}
	if _, err := b.Put(ctx, "k", nil, &blob.PutOptions{IfNotExist: true, IfMatch: "x"}); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("IfNotExist+IfMatch = %v, want ErrInvalidArgument", err)
	}
}

func TestErrorsNameKeyAndMatchSentinels(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	_, err := b.Stat(ctx, "missing/key")
	if !blob.IsNotExist(err) || !strings.Contains(err.Error(), `"missing/key"`) {
		t.Fatalf("Stat(missing) = %v", err)
	}
	var be *blob.Error
	if !errors.As(err, &be) || be.Op != "stat" || be.Code != blob.CodeNotExist {
		t.Fatalf("errors.As = %+v", be)
	}
	if _, err := b.Put(ctx, "k", []byte("1"), &blob.PutOptions{IfNotExist: true}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Put(ctx, "k", []byte("2"), &blob.PutOptions{IfNotExist: true})
	if !blob.IsPreconditionFailed(err) {
		t.Fatalf("second create = %v, want precondition failed", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Stat(cctx, "k"); !errors.Is(err, context.Canceled) || blob.CodeOf(err) != blob.CodeCanceled {
		t.Fatalf("canceled Stat = %v (code %v)", err, blob.CodeOf(err))
	}
}

func TestPrefixedViewIsolation(t *testing.T) {
	ctx := context.Background()
	root := mem.New()
	defer root.Close()
	if _, err := root.Put(ctx, "outside", []byte("o"), nil); err != nil {
		t.Fatal(err)
	}
	p, err := root.Prefixed("logs/a/")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"x", "y/z"} {
		if _, err := p.Put(ctx, k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for a, err := range p.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Key)
	}
	if !slices.Equal(got, []string{"x", "y/z"}) {
		t.Fatalf("prefixed list = %q", got)
	}
	if _, err := root.Stat(ctx, "logs/a/y/z"); err != nil {
		t.Fatalf("object written through the view is not under its prefix: %v", err)
	}
	if _, err := p.Stat(ctx, "outside"); !blob.IsNotExist(err) {
		t.Fatalf("view sees outside object: %v", err)
	}
	if _, err := root.Prefixed("../up/"); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("Prefixed(../up/) = %v", err)
	}
	// Closing a view closes the shared driver.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Stat(ctx, "outside"); !errors.Is(err, blob.ErrClosed) {
		t.Fatalf("Stat after Close = %v, want ErrClosed", err)
	}
}

func TestDeleteBatches(t *testing.T) {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	keys := make([]string, 2500)
	for i := range keys {
		keys[i] = fmt.Sprintf("k/%05d", i)
		if _, err := b.Put(ctx, keys[i], nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	before := b.Stats()
	if err := b.Delete(ctx, keys...); err != nil {
		t.Fatal(err)
	}
	if d := b.Stats().Sub(before); d.Deletes != 3 || d.DeletedKeys != 2500 {
		t.Fatalf("2500 deletes took %d calls for %d keys, want 3 and 2500", d.Deletes, d.DeletedKeys)
	}
	for _, err := range b.List(ctx, "") {
		t.Fatalf("object left after delete (err %v)", err)
	}
}

func TestOpenAndCheckQuery(t *testing.T) {
	ctx := context.Background()
	if _, err := blob.Open(ctx, "nosuch://x"); err == nil || !strings.Contains(err.Error(), `unknown scheme "nosuch"`) {
		t.Fatalf("unknown scheme: %v", err)
	}
	if _, err := blob.Open(ctx, "mem://?color=red&size=1"); err == nil || !strings.Contains(err.Error(), "color, size") {
		t.Fatalf("unknown params: %v", err)
	}
	b, err := blob.Open(ctx, "mem://shared-test/pre/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "k", []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	b2, err := blob.Open(ctx, "mem://shared-test")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b2.ReadAll(ctx, "pre/k"); err != nil || string(got) != "v" {
		t.Fatalf("named mem store not shared: %q %v", got, err)
	}
	u, _ := url.Parse("x://h?a=1&b=2")
	if err := blob.CheckQuery(u, "a", "b"); err != nil {
		t.Fatal(err)
	}
}

func TestRedactURL(t *testing.T) {
	for in, secret := range map[string]string{
		"azblob://c/p?sig=SECRETSIG&sv=2020":      "SECRETSIG",
		"mysql://user:hunter2@tcp(h:3306)/db":     "hunter2",
		"s3://b/p?secret_key=AKIASECRET&region=x": "AKIASECRET",
		"://bad url with ?token=abc":              "abc",
		"s3://b?endpoint=http://u:nested-pw@h:9":  "nested-pw",
	} {
		out := blob.RedactURL(in)
		if strings.Contains(out, secret) {
			t.Errorf("RedactURL(%q) = %q leaks %q", in, out, secret)
		}
	}
	if _, err := blob.Open(context.Background(), "nosuch://u:pw123@h/p?sig=zzz"); err == nil || strings.Contains(err.Error(), "pw123") || strings.Contains(err.Error(), "zzz") {
		t.Fatalf("Open error leaks credentials: %v", err)
	}
}

func TestAppendNotSupported(t *testing.T) {
	b := mem.New()
	defer b.Close()
	if b.CanAppend() {
		t.Fatal("mem claims append")
	}
	if _, err := b.OpenAppend(context.Background(), "k"); !errors.Is(err, blob.ErrNotSupported) {
		t.Fatalf("OpenAppend on mem = %v, want ErrNotSupported", err)
	}
}

// strangerList is mem with one more listed object, one no valid key can
// address (a file whose name was damaged on a local disk).
type strangerList struct{ *mem.Driver }

func (d strangerList) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	page, err := d.Driver.List(ctx, opts)
	if err == nil && opts.Token == "" && strings.HasPrefix("logs/seg\xff", opts.Prefix) {
		page.Objects = append([]blob.Attrs{{Key: "logs/seg\xff", Size: 1}}, page.Objects...)
	}
	return page, err
}

// TestListPassesInvalidKeysThrough: a listed key that is not a valid key is
// yielded as it is, by List and by a prefixed view, for the caller to
// report; reading or deleting it fails with ErrInvalidKey naming it.
func TestListPassesInvalidKeysThrough(t *testing.T) {
	ctx := context.Background()
	b := blob.NewBucket(strangerList{mem.NewDriver()})
	var got []string
	for a, err := range b.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Key)
	}
	if len(got) != 1 || got[0] != "logs/seg\xff" {
		t.Fatalf("List = %q, want the invalid key", got)
	}
	view, err := b.Prefixed("logs/")
	if err != nil {
		t.Fatal(err)
	}
	page, err := view.ListPage(ctx, "", blob.ListOptions{})
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "seg\xff" {
		t.Fatalf("prefixed ListPage = %+v, %v", page, err)
	}
	_, err = view.ReadAll(ctx, "seg\xff")
	if !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), `"seg\xff"`) {
		t.Fatalf("read of the invalid key: %v", err)
	}
	if err := view.Delete(ctx, "seg\xff"); !errors.Is(err, blob.ErrInvalidKey) || !strings.Contains(err.Error(), `"seg\xff"`) {
		t.Fatalf("delete of the invalid key: %v", err)
	}
}

// An error no code fits says its cause without "unknown", which reads as if
// the store had done something unexplained (a full disk's "unknown: … no
// space left on device", logged by the library's WARN lines); a known code
// stays in the message, and "unknown" alone stays when there is no cause.
func TestErrorMessageNamesTheCause(t *testing.T) {
	for _, c := range []struct {
		err  *blob.Error
		want string
	}{
		{&blob.Error{Op: "put", Key: "a", Code: blob.CodeUnknown, Err: errors.New("write a: no space left on device")}, `blob: put "a": write a: no space left on device`},
		{&blob.Error{Op: "put", Key: "a", Code: blob.CodeUnknown}, `blob: put "a": unknown`},
		{&blob.Error{Op: "get", Key: "b", Code: blob.CodeTransient, Err: errors.New("connection reset")}, `blob: get "b": transient: connection reset`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
