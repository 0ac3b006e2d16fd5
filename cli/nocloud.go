//go:build redokit_nocloud

package cli

import (
	"context"
	"fmt"
	"net/url"

	"github.com/redokit/redokit/blob"
)

// A redokit built without the cloud backends still knows their schemes, so
// that a URL of one fails saying why rather than as an unknown scheme.
func init() {
	for _, scheme := range []string{"s3", "gs", "azblob", "gocloud+mem", "gocloud+file"} {
		blob.Register(scheme, func(context.Context, *url.URL) (*blob.Bucket, error) {
			return nil, fmt.Errorf("this redokit was built with -tags redokit_nocloud, without the %s backend: build it without that tag", scheme)
		})
	}
}
