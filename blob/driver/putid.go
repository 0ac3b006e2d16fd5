package driver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// NewPutID returns a random ID (32 hex digits) for a driver to store with
// the object a Put writes, so that a Put whose answer was lost can tell its
// own write from another writer's when it looks (see MayHaveLanded).
func NewPutID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// MayHaveLanded reports whether a Put that failed with an error of code
// might have been applied all the same, its answer lost, so that the driver
// should look for its own write (by its put ID) before failing: the caller's
// ctx is still live, and the code is not one of a request the store refused
// (invalid argument, permission denied) or the caller abandoned.
func MayHaveLanded(ctx context.Context, code Code) bool {
	if ctx.Err() != nil {
		return false
	}
	switch code {
	case CodeInvalidArgument, CodePermissionDenied, CodeCanceled, CodeDeadlineExceeded:
		return false
	}
	return true
}
