//go:build unix

package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/redokit/redokit/blob"
)

// codeError is an error this driver classified itself. It matches the blob
// sentinel of its code with errors.Is (and fs.ErrNotExist for a missing
// object, so callers of the bare driver can use the standard test).
type codeError struct {
	code blob.Code
	msg  string
	key  bool // an invalid key rather than another invalid argument
}

func (e *codeError) Error() string { return e.msg }

func (e *codeError) Is(target error) bool {
	switch e.code {
	case blob.CodeNotExist:
		return target == blob.ErrNotExist || target == fs.ErrNotExist
	case blob.CodePreconditionFailed:
		return target == blob.ErrPreconditionFailed
	case blob.CodeInvalidArgument:
		return target == blob.ErrInvalidArgument || e.key && target == blob.ErrInvalidKey
	}
	return false
}

func notExist(key string) error {
	return &codeError{code: blob.CodeNotExist, msg: fmt.Sprintf("no object %q", key)}
}

func preconditionf(format string, args ...any) error {
	return &codeError{code: blob.CodePreconditionFailed, msg: fmt.Sprintf(format, args...)}
}

func invalidf(format string, args ...any) error {
	return &codeError{code: blob.CodeInvalidArgument, msg: fmt.Sprintf(format, args...)}
}

func invalidKeyf(format string, args ...any) error {
	return &codeError{code: blob.CodeInvalidArgument, msg: fmt.Sprintf(format, args...), key: true}
}

// symlinkError reports a symbolic link met at path (relative to the root).
func symlinkError(path string) error {
	return invalidf("%q is a symbolic link; the local backend never follows links below its root", path)
}

// conflictError reports that key cannot be stored because other, the key of
// an object or a directory of keys, is in its way.
func conflictError(key, other string) error {
	return invalidf("key %q conflicts with %s: a file system cannot hold an object and keys below it", key, other)
}

// errRetry means a directory was removed (by a concurrent Delete pruning it)
// while an operation was using it; the operation re-opens the path.
var errRetry = errors.New("local: a directory was removed while in use")

// maxRetries bounds the re-opens after errRetry, so that a pathological
// churn of one directory ends in an error instead of a livelock.
const maxRetries = 16

func pathErr(op, path string, err error) error {
	if path == "" {
		path = "."
	}
	return &os.PathError{Op: op, Path: path, Err: err}
}
