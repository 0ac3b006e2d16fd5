package azure

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/redokit/redokit/blob"
)

// Scheme is the URL scheme this package registers.
const Scheme = "azblob"

func init() { blob.Register(Scheme, openURL) }

// The environment variables openURL reads.
const (
	EnvAccount          = "AZURE_STORAGE_ACCOUNT"
	EnvKey              = "AZURE_STORAGE_KEY"
	EnvSASToken         = "AZURE_STORAGE_SAS_TOKEN"
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
)

var urlParams = []string{"endpoint", "put_threshold", "block_size", "concurrency", "try_timeout", "max_retries", "batch_delete"}

// openURL opens an "azblob://container/prefix?options" URL with credentials
// from the environment (see the package doc). It is the Opener registered
// for the "azblob" scheme.
func openURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	cfg, err := parseURL(u, os.Getenv)
	if err != nil {
		return nil, err
	}
	client, err := cfg.newClient()
	if err != nil {
		return nil, err
	}
	b, err := New(client, &cfg.opts)
	if err != nil {
		return nil, err
	}
	return blob.OpenPrefixed(b, cfg.prefix)
}

// creds are the account, credentials and endpoint openURL found.
type creds struct {
	account  string
	key      string // shared key, or
	sas      string // a SAS token without the leading "?"
	endpoint string // the account's blob endpoint, without a trailing "/"
	source   string // where they came from, for errors
}

type urlConfig struct {
	container, prefix string
	opts              Options
	creds             creds
}

// parseURL turns a URL and the environment into a configuration without any
// I/O. No error it returns contains a secret.
func parseURL(u *url.URL, getenv func(string) string) (urlConfig, error) {
	var c urlConfig
	if u.User != nil {
		return c, fmt.Errorf("%w: azure: credentials in the URL are not supported (use %s, %s, %s or %s)", blob.ErrInvalidArgument, EnvConnectionString, EnvAccount, EnvKey, EnvSASToken)
	}
	var err error
	if c.container, c.prefix, err = blob.SplitURL(u, Scheme, "container", urlParams...); err != nil {
		return c, fmt.Errorf("azure: %w", err)
	}
	q := u.Query()
	if v := q.Get("put_threshold"); v != "" {
		if c.opts.PutThreshold, err = blob.ParseSize("put_threshold", v); err != nil {
			return c, err
		}
	}
	if v := q.Get("block_size"); v != "" {
		if c.opts.BlockSize, err = blob.ParseSize("block_size", v); err != nil {
			return c, err
		}
	}
	if v := q.Get("concurrency"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n <= 0 {
			return c, fmt.Errorf("%w: azure: concurrency=%q is not a positive integer", blob.ErrInvalidArgument, v)
		}
		c.opts.Concurrency = n
	}
	if v := q.Get("max_retries"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 {
			return c, fmt.Errorf("%w: azure: max_retries=%q is not a non-negative integer", blob.ErrInvalidArgument, v)
		}
		if n == 0 {
			n = -1 // an explicit 0 means no retries
		}
		c.opts.MaxRetries = n
	}
	if v := q.Get("try_timeout"); v != "" {
		t, perr := time.ParseDuration(v)
		if perr != nil || t < 0 {
			return c, fmt.Errorf("%w: azure: try_timeout=%q is not a non-negative duration such as 30s", blob.ErrInvalidArgument, v)
		}
		if t == 0 {
			t = -1 // an explicit 0 disables it
		}
		c.opts.TryTimeout = t
	}
	if v := q.Get("batch_delete"); v != "" {
		on, perr := strconv.ParseBool(v)
		if perr != nil {
			return c, fmt.Errorf("%w: azure: batch_delete=%q is not a boolean", blob.ErrInvalidArgument, v)
		}
		c.opts.NoBatchDelete = !on
	}
	if _, err := c.opts.withDefaults(); err != nil {
		return c, fmt.Errorf("azure: %w", err)
	}

	if c.creds, err = credsFromEnv(getenv); err != nil {
		return c, err
	}
	if v := q.Get("endpoint"); v != "" {
		e, perr := url.Parse(v)
		if perr != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || e.RawQuery != "" {
			return c, fmt.Errorf("%w: azure: endpoint must be an http:// or https:// URL without credentials or query", blob.ErrInvalidArgument)
		}
		c.creds.endpoint = strings.TrimSuffix(v, "/")
	}
	if c.creds.endpoint == "" {
		c.creds.endpoint = "https://" + c.creds.account + ".blob.core.windows.net"
	}
	c.opts.Secrets = []string{c.creds.key, c.creds.sas}
	return c, nil
}

// credsFromEnv reads the credentials in the order the package doc gives.
func credsFromEnv(getenv func(string) string) (creds, error) {
	if cs := getenv(EnvConnectionString); cs != "" {
		return parseConnectionString(cs)
	}
	c := creds{account: getenv(EnvAccount), key: getenv(EnvKey), sas: strings.TrimPrefix(getenv(EnvSASToken), "?")}
	switch {
	case c.account == "":
		return c, fmt.Errorf("%w: azure: no credentials: set %s, or %s with %s or %s", blob.ErrInvalidArgument, EnvConnectionString, EnvAccount, EnvKey, EnvSASToken)
	case c.key != "":
		c.sas, c.source = "", EnvKey
	case c.sas != "":
		c.source = EnvSASToken
	default:
		return c, fmt.Errorf("%w: azure: %s is set but neither %s nor %s", blob.ErrInvalidArgument, EnvAccount, EnvKey, EnvSASToken)
	}
	return c, nil
}

// parseConnectionString reads an Azure Storage connection string
// ("Key=Value;..."). Its errors name keys, never values.
func parseConnectionString(cs string) (creds, error) {
	c := creds{source: EnvConnectionString}
	kv := map[string]string{}
	for part := range strings.SplitSeq(cs, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return c, fmt.Errorf("%w: azure: %s has a part without '='", blob.ErrInvalidArgument, EnvConnectionString)
		}
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if strings.EqualFold(kv["usedevelopmentstorage"], "true") {
		// The shortcut would need the emulator's key built in; spell it out.
		return c, fmt.Errorf("%w: azure: UseDevelopmentStorage is not supported in %s: give AccountName, AccountKey and BlobEndpoint", blob.ErrInvalidArgument, EnvConnectionString)
	}
	c.account, c.key, c.sas = kv["accountname"], kv["accountkey"], strings.TrimPrefix(kv["sharedaccesssignature"], "?")
	if c.key != "" {
		c.sas = ""
	}
	if ep := kv["blobendpoint"]; ep != "" {
		e, err := url.Parse(ep)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return c, fmt.Errorf("%w: azure: BlobEndpoint in %s is not an http(s) URL", blob.ErrInvalidArgument, EnvConnectionString)
		}
		c.endpoint = strings.TrimSuffix(ep, "/")
	} else if c.account != "" {
		proto := kv["defaultendpointsprotocol"]
		if proto == "" {
			proto = "https"
		}
		if proto != "http" && proto != "https" {
			return c, fmt.Errorf("%w: azure: DefaultEndpointsProtocol in %s must be http or https", blob.ErrInvalidArgument, EnvConnectionString)
		}
		suffix := kv["endpointsuffix"]
		if suffix == "" {
			suffix = "core.windows.net"
		}
		c.endpoint = proto + "://" + c.account + ".blob." + suffix
	}
	switch {
	case c.endpoint == "":
		return c, fmt.Errorf("%w: azure: %s has neither AccountName nor BlobEndpoint", blob.ErrInvalidArgument, EnvConnectionString)
	case c.key != "" && c.account == "":
		return c, fmt.Errorf("%w: azure: %s has an AccountKey but no AccountName", blob.ErrInvalidArgument, EnvConnectionString)
	case c.key == "" && c.sas == "":
		return c, fmt.Errorf("%w: azure: %s has neither AccountKey nor SharedAccessSignature", blob.ErrInvalidArgument, EnvConnectionString)
	}
	return c, nil
}

// newClient builds the container client. Its errors name no secret.
func (c urlConfig) newClient() (*container.Client, error) {
	containerURL := c.creds.endpoint + "/" + url.PathEscape(c.container)
	opts := &container.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: DefaultMaxRetries, TryTimeout: DefaultTryTimeout},
	}}
	if c.creds.key != "" {
		cred, err := container.NewSharedKeyCredential(c.creds.account, c.creds.key)
		if err != nil {
			return nil, fmt.Errorf("%w: azure: the account key from %s is not valid base64", blob.ErrInvalidArgument, c.creds.source)
		}
		cl, err := container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
		if err != nil {
			return nil, fmt.Errorf("azure: new client for %s: %w", blob.RedactURL(containerURL), err)
		}
		return cl, nil
	}
	cl, err := container.NewClientWithNoCredential(containerURL+"?"+c.creds.sas, opts)
	if err != nil {
		return nil, fmt.Errorf("azure: new client for %s: %s", blob.RedactURL(containerURL), redactAll(err.Error(), c.creds.sas))
	}
	return cl, nil
}

func redactAll(s string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "xxxxx")
		}
	}
	return sigRE.ReplaceAllString(s, "${1}=xxxxx")
}
