package blob

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redokit/redokit/blob/driver"
)

// Code is a driver's classification of an error, carried by every *Error.
// It is the driver package's type because drivers produce it and callers
// read it: an alias, not a copy, so that a code passes from a driver to a
// caller unconverted and the constants below are the drivers' own.
type Code = driver.Code

// The closed set of error codes (see the driver package).
const (
	CodeUnknown            = driver.CodeUnknown
	CodeNotExist           = driver.CodeNotExist
	CodePreconditionFailed = driver.CodePreconditionFailed
	CodeInvalidArgument    = driver.CodeInvalidArgument
	CodePermissionDenied   = driver.CodePermissionDenied
	CodeNotSupported       = driver.CodeNotSupported
	CodeTransient          = driver.CodeTransient
	CodeCanceled           = driver.CodeCanceled
	CodeDeadlineExceeded   = driver.CodeDeadlineExceeded
)

// Sentinel errors. Match them with errors.Is on any error a Bucket returns.
// The sentinels of the codes are the driver package's values, so that a
// driver's error wrapping one matches here without conversion.
var (
	ErrNotExist           = driver.ErrNotExist
	ErrPreconditionFailed = driver.ErrPreconditionFailed
	ErrInvalidKey         = errors.New("blob: invalid key")
	ErrInvalidArgument    = driver.ErrInvalidArgument
	ErrClosed             = errors.New("blob: bucket is closed")
	ErrNotSupported       = driver.ErrNotSupported
	ErrPermissionDenied   = driver.ErrPermissionDenied
	ErrTransient          = driver.ErrTransient
)

func sentinel(c Code) error {
	switch c {
	case CodeNotExist:
		return ErrNotExist
	case CodePreconditionFailed:
		return ErrPreconditionFailed
	case CodeInvalidArgument:
		return ErrInvalidArgument
	case CodePermissionDenied:
		return ErrPermissionDenied
	case CodeNotSupported:
		return ErrNotSupported
	case CodeTransient:
		return ErrTransient
	case CodeCanceled:
		return context.Canceled
	case CodeDeadlineExceeded:
		return context.DeadlineExceeded
	}
	return nil
}

// Error is the error type every Bucket method returns. It names the operation
// and the key (relative to the bucket the caller holds), carries the driver's
// classification, and wraps the driver's own error for errors.As.
type Error struct {
	Op   string // "put", "read", "stat", "list", "delete", "append", ...
	Key  string // the key (or list prefix) as the caller named it; may be empty
	Code Code
	Err  error // the underlying error; may be a sentinel itself
}

func (e *Error) Error() string {
	msg := "blob: " + e.Op
	if e.Key != "" {
		msg += " " + strconv.Quote(e.Key)
	}
	var cause string
	if e.Err != nil {
		if cause = e.Err.Error(); cause == e.Code.String() {
			cause = ""
		}
	}
	// "unknown" says only that no code fits: the cause says what happened
	// (a full disk read "unknown: … no space left on device", as if the
	// store had done something unexplained).
	if e.Code != CodeUnknown || cause == "" {
		msg += ": " + e.Code.String()
	}
	if cause != "" {
		msg += ": " + cause
	}
	return msg
}

// Unwrap returns the driver's error.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel for e's Code.
func (e *Error) Is(target error) bool {
	s := sentinel(e.Code)
	return s != nil && s == target
}

// CodeOf returns the Code of err: the Code of an *Error in its chain, the code
// of a context error, or CodeUnknown.
func CodeOf(err error) Code {
	var be *Error
	switch {
	case err == nil:
		return CodeUnknown
	case errors.As(err, &be):
		return be.Code
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeadlineExceeded
	case errors.Is(err, ErrNotExist):
		return CodeNotExist
	case errors.Is(err, ErrPreconditionFailed):
		return CodePreconditionFailed
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidArgument):
		return CodeInvalidArgument
	case errors.Is(err, ErrNotSupported):
		return CodeNotSupported
	case errors.Is(err, ErrPermissionDenied):
		return CodePermissionDenied
	case errors.Is(err, ErrTransient):
		return CodeTransient
	}
	return CodeUnknown
}

// IsNotExist reports whether err means the object does not exist.
func IsNotExist(err error) bool { return errors.Is(err, ErrNotExist) }

// IsPreconditionFailed reports whether err means a conditional write lost.
func IsPreconditionFailed(err error) bool { return errors.Is(err, ErrPreconditionFailed) }

// IsTransient reports whether err is worth retrying.
func IsTransient(err error) bool { return CodeOf(err) == CodeTransient }

// wrap turns a driver error into an *Error. Errors that are already *Error
// (from a nested Bucket) keep their code; context errors keep theirs.
func wrap(d driver.Driver, op, key string, err error) error {
	if err == nil {
		return nil
	}
	var be *Error
	if errors.As(err, &be) {
		return &Error{Op: op, Key: key, Code: be.Code, Err: be.Err}
	}
	code := CodeUnknown
	switch {
	case errors.Is(err, context.Canceled):
		code = CodeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		code = CodeDeadlineExceeded
	case errors.Is(err, ErrInvalidKey):
		return &Error{Op: op, Key: key, Code: CodeInvalidArgument, Err: err}
	case errors.Is(err, ErrClosed):
		// No code of their own: errors.Is finds the sentinel through Unwrap.
		return &Error{Op: op, Key: key, Code: CodeUnknown, Err: err}
	default:
		if d != nil {
			code = d.ErrorCode(err)
		}
		if code == CodeUnknown {
			code = CodeOf(err)
		}
	}
	return &Error{Op: op, Key: key, Code: code, Err: err}
}

func errorf(op, key string, code Code, format string, args ...any) error {
	return &Error{Op: op, Key: key, Code: code, Err: fmt.Errorf(format, args...)}
}
