package driver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redokit/redokit/blob/driver"
)

func TestHTTPStatusCode(t *testing.T) {
	want := map[int]driver.Code{0: driver.CodeUnknown, 200: driver.CodeUnknown, 304: driver.CodeUnknown, 400: driver.CodeInvalidArgument,
		401: driver.CodePermissionDenied, 403: driver.CodePermissionDenied, 404: driver.CodeNotExist, 408: driver.CodeTransient,
		409: driver.CodeUnknown, 412: driver.CodePreconditionFailed, 416: driver.CodeInvalidArgument, 429: driver.CodeTransient,
		500: driver.CodeTransient, 503: driver.CodeTransient}
	for status, c := range want {
		if got := driver.HTTPStatusCode(status); got != c {
			t.Errorf("HTTPStatusCode(%d) = %v, want %v", status, got, c)
		}
	}
}

func TestContextCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code driver.Code
		ok   bool
	}{
		{nil, driver.CodeUnknown, true},
		{fmt.Errorf("sdk: %w", context.Canceled), driver.CodeCanceled, true},
		{fmt.Errorf("sdk: %w", context.DeadlineExceeded), driver.CodeDeadlineExceeded, true},
		{errors.New("other"), driver.CodeUnknown, false},
	} {
		if c, ok := driver.ContextCode(tc.err); c != tc.code || ok != tc.ok {
			t.Errorf("ContextCode(%v) = %v, %v; want %v, %v", tc.err, c, ok, tc.code, tc.ok)
		}
	}
}

func TestMayHaveLanded(t *testing.T) {
	live, cancel := context.WithCancel(context.Background())
	for _, c := range []driver.Code{driver.CodeUnknown, driver.CodeTransient, driver.CodePreconditionFailed, driver.CodeNotExist} {
		if !driver.MayHaveLanded(live, c) {
			t.Errorf("%v with a live ctx: want a look for our own write", c)
		}
	}
	for _, c := range []driver.Code{driver.CodeInvalidArgument, driver.CodePermissionDenied, driver.CodeCanceled, driver.CodeDeadlineExceeded} {
		if driver.MayHaveLanded(live, c) {
			t.Errorf("%v: the store refused or the caller gave up; want no look", c)
		}
	}
	cancel()
	if driver.MayHaveLanded(live, driver.CodeTransient) {
		t.Error("with the caller's ctx done: want no look")
	}
	if id := driver.NewPutID(); len(id) != 32 || id == driver.NewPutID() {
		t.Errorf("put IDs %q: want 32 hex digits, new each time", id)
	}
}
