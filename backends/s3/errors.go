package s3

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// ErrorCode classifies an error of this package or of aws-sdk-go-v2's S3
// client (see the package doc for the table).
func ErrorCode(err error) blob.Code {
	if c, ok := driver.ContextCode(err); ok {
		return c
	}
	var ce *conditionError
	if errors.As(err, &ce) {
		return blob.CodePreconditionFailed
	}
	var de *DeleteError
	if errors.As(err, &de) {
		return de.Code()
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if c := codeOfS3(api.ErrorCode(), httpStatus(err)); c != blob.CodeUnknown {
			return c
		}
	} else if st := httpStatus(err); st != 0 {
		if c := codeOfS3("", st); c != blob.CodeUnknown {
			return c
		}
	}
	var te *attemptTimeoutError
	var ne net.Error
	switch {
	case errors.As(err, &te):
		return blob.CodeTransient
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return blob.CodeTransient
	case errors.As(err, &ne) && ne.Timeout():
		return blob.CodeTransient
	}
	// What the SDK's retryer would retry is transient by definition
	// (connection errors it recognises by their text, like "connection
	// reset" and "use of closed network connection").
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool() {
		return blob.CodeTransient
	}
	var rse *smithyhttp.RequestSendError
	if errors.As(err, &rse) {
		return blob.CodeTransient
	}
	return blob.CodeOf(err)
}

// codeOfS3 maps an S3 error code and HTTP status (either may be empty/0).
func codeOfS3(code string, status int) blob.Code {
	switch code {
	case "NoSuchKey", "NoSuchBucket", "NotFound":
		return blob.CodeNotExist
	case "PreconditionFailed", "ConditionalRequestConflict":
		return blob.CodePreconditionFailed
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "AccountProblem",
		"InvalidSecurity", "ExpiredToken", "InvalidToken":
		return blob.CodePermissionDenied
	case "InvalidRange", "InvalidArgument", "InvalidRequest", "InvalidPart", "InvalidPartOrder", "EntityTooSmall",
		"EntityTooLarge", "KeyTooLongError", "MalformedXML", "InvalidDigest", "BadDigest", "IncompleteBody",
		"InvalidBucketName", "MetadataTooLarge",
		// versitygw's posix backend: a key is also a "directory" of others.
		"ExistingObjectIsDirectory", "ObjectParentIsFile", "DirectoryObjectContainsData":
		return blob.CodeInvalidArgument
	case "NotImplemented":
		return blob.CodeNotSupported
	case "SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
		"RequestThrottled", "BandwidthLimitExceeded", "RequestTimeout", "RequestTimeoutException",
		"InternalError", "ServiceUnavailable", "OperationAborted":
		return blob.CodeTransient
	}
	if status == http.StatusNotImplemented {
		return blob.CodeNotSupported
	}
	return driver.HTTPStatusCode(status)
}

// httpStatus returns the HTTP status of an SDK response error, or 0.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// apiCode returns the S3 error code of err, or "".
func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// isBucketMissing reports a NoSuchBucket error (which, unlike a missing
// key, a delete must not swallow).
func isBucketMissing(err error) bool {
	return apiCode(err) == "NoSuchBucket" || strings.Contains(apiCode(err), "NoSuchBucket")
}

// conditionError is a failed If-Match that S3 reports as 404 NoSuchKey (the
// object is gone): for the driver contract that is a lost precondition.
type conditionError struct{ err error }

func (e *conditionError) Error() string {
	return "s3: if-match: the object does not exist: " + e.err.Error()
}
func (e *conditionError) Unwrap() error { return e.err }

// conditionFailed turns the error of a write with IfMatch on a missing key
// into a precondition failure; other errors pass.
func conditionFailed(p *putReq, err error) error {
	if p.opts.IfMatch != "" && ErrorCode(err) == blob.CodeNotExist && !isBucketMissing(err) {
		return &conditionError{err}
	}
	return err
}
