package gocloud

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	gcblob "gocloud.dev/blob"
	// The two gocloud drivers with no cloud SDK behind them. The cloud ones
	// (s3blob, gcsblob, azureblob) are left to the program's own blank
	// imports so that this package does not pull in every cloud SDK.
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/memblob"

	"github.com/redokit/redokit/blob"
)

// SchemePrefix starts every redokit URL scheme this package registers: the
// redokit URL "gocloud+<scheme>://rest" opens the gocloud URL
// "<scheme>://rest". (redokit's own "mem" and "file" schemes belong to
// backends/mem and backends/local, hence the prefix.)
const SchemePrefix = "gocloud+"

func init() {
	RegisterScheme("mem")
	RegisterScheme("file")
}

// RegisterScheme makes the redokit URL scheme "gocloud+"+gocloudScheme open
// gocloud URLs of gocloudScheme through gocloud's default URL mux. This
// package registers "mem" and "file"; for a cloud store, blank-import the
// gocloud driver and register its scheme once, from an init function:
//
//	import _ "gocloud.dev/blob/s3blob"
//
//	func init() { gocloud.RegisterScheme("s3") } // "gocloud+s3://bucket?region=…"
//
// Like blob.Register, it panics if the scheme is already registered or is not
// a valid scheme.
func RegisterScheme(gocloudScheme string) {
	if gocloudScheme == "" || !validScheme(gocloudScheme) {
		panic(fmt.Sprintf("gocloud: invalid scheme %q", gocloudScheme))
	}
	blob.Register(SchemePrefix+gocloudScheme, func(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
		return openRedokitURL(ctx, gocloudScheme, u)
	})
}

// validScheme accepts RFC 3986 scheme characters in lower case.
func validScheme(s string) bool {
	for i, r := range s {
		switch {
		case 'a' <= r && r <= 'z':
		case i > 0 && ('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}

// openRedokitURL opens "gocloud+<scheme>://…". The "prefix" parameter becomes
// a redokit prefix view (so it is validated like any redokit prefix) rather
// than gocloud's PrefixedBucket; gocloud's "key" (a single-key bucket, which
// cannot list) is refused. Every other parameter is the gocloud driver's, and
// the driver rejects those it does not know.
func openRedokitURL(ctx context.Context, scheme string, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	if q.Has("key") {
		return nil, fmt.Errorf("%w: query parameter key (a gocloud single-key bucket) cannot hold a redo log", blob.ErrInvalidArgument)
	}
	prefix := q.Get("prefix")
	q.Del("prefix")
	g := *u
	g.Scheme = scheme
	g.RawQuery = q.Encode()
	b, err := open(ctx, &g)
	if err != nil {
		return nil, err
	}
	return blob.OpenPrefixed(b, prefix)
}

// open opens a gocloud URL ("mem://", "file:///var/redo?create_dir=1",
// "s3://bucket?region=…" once s3blob is imported, …) through gocloud's
// default URL mux, exactly as gcblob.OpenBucket would. A memblob bucket is
// private to the returned Bucket, so open turns on Options.LocalCAS for it;
// nothing else gets it.
func open(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	d, err := openDriver(ctx, u)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

func openDriver(ctx context.Context, u *url.URL) (*Driver, error) {
	mux := gcblob.DefaultURLMux()
	if !mux.ValidBucketScheme(u.Scheme) {
		return nil, fmt.Errorf("gocloud: no gocloud driver for scheme %q (registered: %s); blank-import its package, for example gocloud.dev/blob/s3blob",
			u.Scheme, strings.Join(mux.BucketSchemes(), ", "))
	}
	gb, err := mux.OpenBucketURL(ctx, u)
	if err != nil {
		err = &redactedError{url: u.String(), err: err}
		if badQuery(err) {
			// A mistake in the URL, as an unknown parameter of our own
			// backends is: the CLI exits 2 on it.
			return nil, fmt.Errorf("%w: %w", blob.ErrInvalidArgument, err)
		}
		return nil, err
	}
	// memblob opens a new, empty bucket on every URL, so nothing but this
	// Driver can write to it: the condition LocalCAS needs.
	return NewDriver(gb, &Options{LocalCAS: u.Scheme == "mem"})
}

// badQuery reports whether a gocloud open error refuses a query parameter:
// its drivers return plain errors with one wording for it (memblob,
// fileblob, gcsblob, s3blob's "unknown query parameter").
func badQuery(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "invalid query parameter") || strings.Contains(msg, "unknown query parameter")
}

// redactedError is a gocloud open error whose text may quote the URL it was
// given (query secrets included); it prints the URL redacted and still
// unwraps to gocloud's error.
type redactedError struct {
	url string
	err error
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	if e.url != "" {
		msg = strings.ReplaceAll(msg, e.url, blob.RedactURL(e.url))
	}
	return "gocloud: " + msg
}

func (e *redactedError) Unwrap() error { return e.err }
