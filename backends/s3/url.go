package s3

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redokit/redokit/blob"
)

func init() {
	blob.Register("s3", openURL)
}

// queryParams are the options an s3:// URL may carry.
var queryParams = []string{
	"region", "endpoint", "use_path_style", "disable_https", "sse", "sse_kms_key_id",
	"part_size", "multipart_threshold", "concurrency", "timeout", "max_attempts",
}

func openURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	bucket, prefix, o, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	b, err := New(nil, bucket, o)
	if err != nil {
		return nil, err
	}
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	return blob.OpenPrefixed(b, prefix)
}

// parseURL splits an s3:// URL into the bucket, the key prefix and the
// options. Its errors never show a URL's user information.
func parseURL(u *url.URL) (bucket, prefix string, o *Options, err error) {
	if u.Scheme != "s3" {
		return "", "", nil, fmt.Errorf("%w: s3: scheme %q is not s3", blob.ErrInvalidArgument, u.Scheme)
	}
	if u.User != nil {
		return "", "", nil, fmt.Errorf("%w: s3: credentials do not belong in the URL; use the AWS credential chain (AWS_ACCESS_KEY_ID, AWS_PROFILE, a role, …)", blob.ErrInvalidArgument)
	}
	if u.Host == "" {
		return "", "", nil, fmt.Errorf("%w: s3: the URL names no bucket (s3://BUCKET[/PREFIX])", blob.ErrInvalidArgument)
	}
	if err := blob.CheckQuery(u, queryParams...); err != nil {
		return "", "", nil, err
	}
	o = &Options{}
	q := u.Query()
	for k, vs := range q {
		if len(vs) != 1 {
			return "", "", nil, fmt.Errorf("%w: s3: query parameter %s is given %d times", blob.ErrInvalidArgument, k, len(vs))
		}
	}
	o.Region = q.Get("region")
	o.Endpoint = q.Get("endpoint")
	o.SSE = q.Get("sse")
	o.SSEKMSKeyID = q.Get("sse_kms_key_id")
	bools := []struct {
		name string
		dst  *bool
	}{{"use_path_style", &o.UsePathStyle}, {"disable_https", &o.DisableHTTPS}}
	for _, b := range bools {
		if v := q.Get(b.name); v != "" {
			if *b.dst, err = strconv.ParseBool(v); err != nil {
				return "", "", nil, fmt.Errorf("%w: s3: %s=%q is not a boolean", blob.ErrInvalidArgument, b.name, v)
			}
		}
	}
	sizes := []struct {
		name string
		dst  *int64
	}{{"part_size", &o.PartSize}, {"multipart_threshold", &o.MultipartThreshold}}
	for _, s := range sizes {
		if v := q.Get(s.name); v != "" {
			if *s.dst, err = parseSize(v); err != nil {
				return "", "", nil, fmt.Errorf("%w: s3: %s=%q: %v", blob.ErrInvalidArgument, s.name, v, err)
			}
		}
	}
	if q.Has("multipart_threshold") && o.MultipartThreshold == 0 {
		// Zero in Options means the default; in a URL it means "always
		// multipart" (every object of at least one byte).
		o.MultipartThreshold = -1
	}
	if v := q.Get("concurrency"); v != "" {
		if o.Concurrency, err = strconv.Atoi(v); err != nil || o.Concurrency < 1 {
			return "", "", nil, fmt.Errorf("%w: s3: concurrency=%q is not a positive integer", blob.ErrInvalidArgument, v)
		}
	}
	if v := q.Get("max_attempts"); v != "" {
		if o.MaxAttempts, err = strconv.Atoi(v); err != nil || o.MaxAttempts < 1 {
			return "", "", nil, fmt.Errorf("%w: s3: max_attempts=%q is not a positive integer", blob.ErrInvalidArgument, v)
		}
	}
	if v := q.Get("timeout"); v != "" {
		if o.Timeout, err = time.ParseDuration(v); err != nil || o.Timeout < 0 {
			return "", "", nil, fmt.Errorf("%w: s3: timeout=%q is not a non-negative duration", blob.ErrInvalidArgument, v)
		}
		if o.Timeout == 0 {
			o.Timeout = -1 // disabled
		}
	}
	if _, err := endpointURL(o.Endpoint, o.DisableHTTPS); err != nil {
		return "", "", nil, err
	}
	if _, err := o.withDefaults(); err != nil {
		return "", "", nil, err
	}
	return u.Host, strings.Trim(u.Path, "/"), o, nil
}

// parseSize parses "8MiB", "512KiB", "1GiB", "100B" or plain bytes.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	num := s
	for _, u := range units {
		if len(s) > len(u.suffix) && strings.EqualFold(s[len(s)-len(u.suffix):], u.suffix) {
			num, mult = strings.TrimSpace(s[:len(s)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a size (bytes, or a number with B, KiB, MiB or GiB)")
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("too large")
	}
	return n * mult, nil
}
