//go:build !redokit_nocloud

package cli

// The cloud backends: their SDKs are about three quarters of the binary and
// of the first build's download and compile time. Build with
// -tags redokit_nocloud for a redokit of local disk and memory only (see
// nocloud.go).
import (
	_ "github.com/redokit/redokit/backends/azure"
	_ "github.com/redokit/redokit/backends/gcs"
	_ "github.com/redokit/redokit/backends/gocloud"
	_ "github.com/redokit/redokit/backends/s3"
)
