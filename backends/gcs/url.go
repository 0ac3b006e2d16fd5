package gcs

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/redokit/redokit/blob"
)

// Scheme is the URL scheme this package registers.
const Scheme = "gs"

func init() { blob.Register(Scheme, openURL) }

// urlParams are the query parameters openURL knows.
var urlParams = []string{"chunk_size", "resumable_threshold", "concurrency", "timeout", "max_attempts", "endpoint", "anonymous"}

// openURL opens a "gs://bucket/prefix?options" URL (see the package doc). It is
// the Opener registered for the "gs" scheme.
func openURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	client, err := storage.NewClient(ctx, cfg.clientOpts...)
	if err != nil {
		return nil, fmt.Errorf("gcs: new client: %w", err)
	}
	cfg.opts.OwnClient = true
	b, err := New(client, cfg.bucket, &cfg.opts)
	if err != nil {
		client.Close()
		return nil, err
	}
	return blob.OpenPrefixed(b, cfg.prefix)
}

type urlConfig struct {
	bucket, prefix string
	opts           Options
	clientOpts     []option.ClientOption
}

// parseURL turns a URL into a configuration without any I/O, so that URL
// errors are found before a client is built.
func parseURL(u *url.URL) (urlConfig, error) {
	var c urlConfig
	if u.User != nil {
		return c, fmt.Errorf("%w: gcs: credentials in the URL are not supported (use Application Default Credentials)", blob.ErrInvalidArgument)
	}
	var err error
	if c.bucket, c.prefix, err = blob.SplitURL(u, Scheme, "bucket", urlParams...); err != nil {
		return c, fmt.Errorf("gcs: %w", err)
	}
	q := u.Query()
	if v := q.Get("chunk_size"); v != "" {
		n, perr := blob.ParseSize("chunk_size", v)
		if perr != nil {
			return c, perr
		}
		if n > 1<<30 {
			return c, fmt.Errorf("%w: gcs: chunk_size %s is larger than 1GiB", blob.ErrInvalidArgument, v)
		}
		c.opts.ChunkSize = int(n)
	}
	if v := q.Get("resumable_threshold"); v != "" {
		if c.opts.ResumableThreshold, err = blob.ParseSize("resumable_threshold", v); err != nil {
			return c, err
		}
	}
	if v := q.Get("concurrency"); v != "" {
		if c.opts.Concurrency, err = parsePositive("concurrency", v); err != nil {
			return c, err
		}
	}
	if v := q.Get("max_attempts"); v != "" {
		if c.opts.MaxAttempts, err = parsePositive("max_attempts", v); err != nil {
			return c, err
		}
	}
	if v := q.Get("timeout"); v != "" {
		t, perr := time.ParseDuration(v)
		if perr != nil || t < 0 {
			return c, fmt.Errorf("%w: gcs: timeout %q is not a non-negative duration such as 30s", blob.ErrInvalidArgument, v)
		}
		if t == 0 {
			t = -1 // explicit 0 disables the deadline
		}
		c.opts.Timeout = t
	}
	// No telemetry leaves the process unless the caller's own client sends it.
	c.clientOpts = []option.ClientOption{storage.WithDisabledClientMetrics()}
	if v := q.Get("endpoint"); v != "" {
		e, perr := url.Parse(v)
		if perr != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil {
			return c, fmt.Errorf("%w: gcs: endpoint must be an http:// or https:// URL without credentials", blob.ErrInvalidArgument)
		}
		c.clientOpts = append(c.clientOpts, option.WithEndpoint(v))
	}
	if v := q.Get("anonymous"); v != "" {
		anon, perr := strconv.ParseBool(v)
		if perr != nil {
			return c, fmt.Errorf("%w: gcs: anonymous=%q is not a boolean", blob.ErrInvalidArgument, v)
		}
		if anon {
			c.clientOpts = append(c.clientOpts, option.WithoutAuthentication())
		}
	}
	return c, nil
}

func parsePositive(name, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: gcs: %s=%q is not a positive integer", blob.ErrInvalidArgument, name, v)
	}
	return n, nil
}
