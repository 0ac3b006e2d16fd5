package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// timeoutClient bounds each attempt of a request. It sits under the SDK's
// retryer (it wraps the HTTP client, which every attempt calls), so a
// stalled attempt fails alone and is retried; a context timeout around the
// whole call could not do that.
//
// The timer runs from the start of the attempt to the response headers
// (the request body is sent in that time), and then from one read of the
// response body to the next: a body that keeps moving is never cut, one that
// stalls for the timeout is.
type timeoutClient struct {
	base    awss3.HTTPClient
	timeout time.Duration
}

// attemptTimeoutError is the error of an attempt that ran out of time. It is
// a net.Error timeout, so the SDK retries it and ErrorCode calls it
// transient.
type attemptTimeoutError struct {
	timeout time.Duration
	during  string
}

func (e *attemptTimeoutError) Error() string {
	return fmt.Sprintf("s3: no progress for %v %s (per-attempt timeout)", e.timeout, e.during)
}
func (e *attemptTimeoutError) Timeout() bool   { return true }
func (e *attemptTimeoutError) Temporary() bool { return true }

var errAttemptTimeout = errors.New("s3: per-attempt timeout")

func (c *timeoutClient) Do(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(c.timeout, func() { cancel(errAttemptTimeout) })
	resp, err := c.base.Do(req.WithContext(ctx))
	stopped := timer.Stop()
	if err != nil {
		if !stopped && context.Cause(ctx) == errAttemptTimeout && req.Context().Err() == nil {
			err = &attemptTimeoutError{timeout: c.timeout, during: "awaiting the response to " + req.Method}
		}
		cancel(nil)
		return resp, err
	}
	if !stopped && req.Context().Err() == nil && context.Cause(ctx) == errAttemptTimeout {
		// The headers and the timeout arrived together: the body is
		// canceled already.
		resp.Body.Close()
		cancel(nil)
		return nil, &attemptTimeoutError{timeout: c.timeout, during: "awaiting the response to " + req.Method}
	}
	resp.Body = &idleBody{rc: resp.Body, timer: timer, timeout: c.timeout, ctx: ctx, parent: req.Context(), cancel: cancel}
	return resp, nil
}

// CloseIdleConnections passes through, so Driver.Close reaches the
// transport.
func (c *timeoutClient) CloseIdleConnections() {
	if ci, ok := c.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// idleBody re-arms the attempt's timer around each read, and ends the
// attempt's context when closed.
type idleBody struct {
	rc      io.ReadCloser
	timer   *time.Timer
	timeout time.Duration
	ctx     context.Context
	parent  context.Context
	cancel  context.CancelCauseFunc
	once    sync.Once
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.timeout)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	if err != nil && err != io.EOF && b.parent.Err() == nil && context.Cause(b.ctx) == errAttemptTimeout {
		err = &attemptTimeoutError{timeout: b.timeout, during: "reading a response body"}
	}
	return n, err
}

func (b *idleBody) Close() error {
	err := b.rc.Close()
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
	})
	return err
}
