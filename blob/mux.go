package blob

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Opener opens a Bucket from a parsed URL of its scheme. It must reject query
// parameters it does not know (see CheckQuery) and must not put credentials in
// its errors.
type Opener func(ctx context.Context, u *url.URL) (*Bucket, error)

var mux struct {
	sync.RWMutex
	openers map[string]Opener
}

// Register makes scheme openable by Open. Backends call it from init. It
// panics if scheme is registered twice or is not a valid URL scheme.
func Register(scheme string, o Opener) {
	if scheme == "" || strings.ToLower(scheme) != scheme || strings.ContainsAny(scheme, ":/") {
		panic(fmt.Sprintf("blob: invalid scheme %q", scheme))
	}
	mux.Lock()
	defer mux.Unlock()
	if mux.openers == nil {
		mux.openers = map[string]Opener{}
	}
	if _, dup := mux.openers[scheme]; dup {
		panic(fmt.Sprintf("blob: scheme %q registered twice", scheme))
	}
	mux.openers[scheme] = o
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	mux.RLock()
	defer mux.RUnlock()
	out := make([]string, 0, len(mux.openers))
	for s := range mux.openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Open opens the bucket a URL names, such as "file:///var/redo" or
// "s3://bucket/prefix?region=eu-west-1". The scheme's backend package must be
// imported (for its init). Errors never show credentials from the URL.
func Open(ctx context.Context, rawURL string) (*Bucket, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("blob: open %s: malformed URL", RedactURL(rawURL))
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("blob: open %s: the URL has no scheme (want one of %s)", RedactURL(rawURL), strings.Join(Schemes(), ", "))
	}
	mux.RLock()
	o := mux.openers[u.Scheme]
	mux.RUnlock()
	if o == nil {
		return nil, fmt.Errorf("blob: open %s: unknown scheme %q (registered: %s)", RedactURL(rawURL), u.Scheme, strings.Join(Schemes(), ", "))
	}
	b, err := o(ctx, u)
	if err != nil {
		return nil, &openError{url: RedactURL(rawURL), err: err}
	}
	return b, nil
}

// openError names the URL an opener refused. Openers' errors often carry
// "blob: " themselves (ErrInvalidArgument's text, after the backend's name
// or not): it is said once, in front.
type openError struct {
	url string
	err error
}

func (e *openError) Error() string {
	msg := strings.ReplaceAll(strings.TrimPrefix(e.err.Error(), "blob: "), ": blob: ", ": ")
	return "blob: open " + e.url + ": " + msg
}

func (e *openError) Unwrap() error { return e.err }

// CheckQuery returns an error naming every query parameter of u that is not in
// allowed.
func CheckQuery(u *url.URL, allowed ...string) error {
	var unknown []string
	for k := range u.Query() {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	known := "none"
	if len(allowed) > 0 {
		known = strings.Join(allowed, ", ")
	}
	return fmt.Errorf("%w: unknown query parameter(s) %s (known: %s)", ErrInvalidArgument, strings.Join(unknown, ", "), known)
}

// SplitURL checks the parts of an Opener's URL that the object stores share
// and splits it: the scheme must be scheme and every query parameter in
// allowed; the host names the bucket (what the store calls it: "bucket",
// "container") and the path, if any, the key prefix, returned with a
// trailing "/". An Opener refuses user information itself, naming where its
// credentials come from instead.
func SplitURL(u *url.URL, scheme, what string, allowed ...string) (bucket, prefix string, err error) {
	if u.Scheme != scheme {
		return "", "", fmt.Errorf("%w: scheme %q, want %q", ErrInvalidArgument, u.Scheme, scheme)
	}
	if err := CheckQuery(u, allowed...); err != nil {
		return "", "", err
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("%w: the URL names no %s (want %s://%s/PREFIX)", ErrInvalidArgument, what, scheme, strings.ToUpper(what))
	}
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		prefix = strings.TrimSuffix(p, "/") + "/"
	}
	return u.Host, prefix, nil
}

// OpenPrefixed is the last step of an Opener: b itself for prefix "", else
// the view of b under prefix, closing b if prefix is not a valid one.
func OpenPrefixed(b *Bucket, prefix string) (*Bucket, error) {
	if prefix == "" {
		return b, nil
	}
	p, err := b.Prefixed(prefix)
	if err != nil {
		b.Close()
		return nil, err
	}
	return p, nil
}

// sensitive are query parameters whose values are secrets (SAS tokens, keys,
// passwords) and must not be printed.
var sensitive = []string{"sig", "signature", "key", "secret", "password", "token", "credential", "accountkey", "access_key", "secret_key", "sas", "x-amz-signature", "x-amz-credential", "x-amz-security-token"}

// RedactURL returns rawURL with any password and the values of secret-looking
// query parameters replaced by "xxxxx", for error messages and logs.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		// Unparseable (a DSN such as user:pw@tcp(host)/db): keep the
		// user name, hide the password, drop the query.
		s := rawURL
		if i := strings.IndexByte(s, '?'); i >= 0 {
			s = s[:i] + "?…"
		}
		start := 0
		if i := strings.Index(s, "://"); i >= 0 {
			start = i + 3
		}
		if at := strings.LastIndexByte(s, '@'); at > start {
			user := s[start:at]
			if c := strings.IndexByte(user, ':'); c >= 0 {
				s = s[:start] + user[:c] + ":xxxxx" + s[at:]
			}
		}
		return s
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i, v := range vs {
				if strings.Contains(v, "://") && strings.Contains(v, "@") {
					vs[i] = RedactURL(v) // an endpoint=http://user:pw@host parameter
				}
			}
			lk := strings.ToLower(k)
			for _, s := range sensitive {
				if lk == s || strings.Contains(lk, s) {
					q[k] = []string{"xxxxx"}
					break
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
