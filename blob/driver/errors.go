package driver

import (
	"context"
	"errors"
	"strconv"
)

// Code classifies a driver error. A driver maps its native errors to a Code
// in [Driver.ErrorCode]; the Bucket turns the code into a match for the
// sentinel of the same meaning, so callers never see a store's own errors
// unless they ask for them with errors.As.
type Code int

// The closed set of error codes. Callers retry only CodeTransient, so a
// driver must not report a permanent failure as transient, nor a throttled
// request as anything else.
const (
	CodeUnknown            Code = iota // anything else; not retried by callers
	CodeNotExist                       // the object (or bucket) does not exist
	CodePreconditionFailed             // a conditional write lost: if-not-exists on an existing key, or if-match on a changed ETag
	CodeInvalidArgument                // the request was malformed (a bad range, an invalid option)
	CodePermissionDenied               // credentials lack the permission
	CodeNotSupported                   // the driver cannot do this (for example a conditional write the server ignores)
	CodeTransient                      // throttling, 5xx, a reset connection: worth retrying
	CodeCanceled                       // the context was canceled
	CodeDeadlineExceeded               // the context's deadline passed
)

var codeNames = [...]string{"unknown", "not exist", "precondition failed", "invalid argument", "permission denied", "not supported", "transient", "canceled", "deadline exceeded"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// The sentinels of the codes. A driver with no native error for a case (a
// store in memory, a check of its own) returns an error wrapping one of them,
// and the Bucket classifies it without asking ErrorCode; package blob exports
// the same values under the same names, which is what callers match.
var (
	ErrNotExist           = errors.New("blob: object does not exist")
	ErrPreconditionFailed = errors.New("blob: precondition failed")
	ErrInvalidArgument    = errors.New("blob: invalid argument")
	ErrPermissionDenied   = errors.New("blob: permission denied")
	ErrNotSupported       = errors.New("blob: operation not supported by this backend")
	ErrTransient          = errors.New("blob: transient failure")
)

// ContextCode classifies what a driver's ErrorCode settles before it looks
// at its store's errors: nil is CodeUnknown, and an error that wraps
// context.Canceled or context.DeadlineExceeded (an SDK error the caller's
// context caused wraps it) is CodeCanceled or CodeDeadlineExceeded. ok is
// false for any other error.
func ContextCode(err error) (c Code, ok bool) {
	switch {
	case err == nil:
		return CodeUnknown, true
	case errors.Is(err, context.Canceled):
		return CodeCanceled, true
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeadlineExceeded, true
	}
	return CodeUnknown, false
}

// HTTPStatusCode classifies the HTTP status of a failed request the way the
// HTTP object stores (S3, GCS, Azure) mean it: 404 not exist, 412
// precondition failed, 401 and 403 permission denied, 400 and 416 invalid
// argument, 408, 429 and 5xx transient, anything else (0 included)
// CodeUnknown. A driver maps its store's own error codes first, and a status
// its store gives a meaning of its own (S3's 501) before calling it. The
// numbers are literal so that this package does not link net/http.
func HTTPStatusCode(status int) Code {
	switch {
	case status == 404: // Not Found
		return CodeNotExist
	case status == 412: // Precondition Failed
		return CodePreconditionFailed
	case status == 401, status == 403: // Unauthorized, Forbidden
		return CodePermissionDenied
	case status == 400, status == 416: // Bad Request, Range Not Satisfiable
		return CodeInvalidArgument
	case status == 408, status == 429, status >= 500: // Request Timeout, Too Many Requests, server errors
		return CodeTransient
	}
	return CodeUnknown
}
