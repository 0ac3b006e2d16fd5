package conformance

import (
	"context"
	"strings"
	"testing"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/blob"
)

// memHarness certifies the mem backend.
var memHarness = Harness{
	MakeBucket: func(ctx context.Context, t TB) (*blob.Bucket, error) {
		return mem.New(), nil
	},
	ConditionalWrites: true,
}

// appendHarness certifies mem with a healthy Appender.
var appendHarness = Harness{
	MakeBucket: func(ctx context.Context, t TB) (*blob.Bucket, error) {
		return blob.NewBucket(appendMem{mem.NewDriver()}), nil
	},
	ConditionalWrites: true,
	Append:            true,
}

func TestMem(t *testing.T) { RunBucket(t, memHarness) }

func TestMemAppend(t *testing.T) {
	h := appendHarness
	h.LargeObject, h.LargeObjectReason = 1<<20, "TestMem covers the large round trip on the same store"
	RunBucket(t, h)
}

// TestMemOnRecorder runs the suite on the recorder: the mem backend passes
// there too, so a broken driver's failures are its own, not the recorder's.
func TestMemOnRecorder(t *testing.T) {
	for name, h := range map[string]Harness{"mem": small(memHarness), "append": small(appendHarness)} {
		t.Run(name, func(t *testing.T) {
			rec := NewRecorder()
			rec.Run(func(t T) { RunBucketOn(t, h) })
			if f := rec.Failed(); len(f) > 0 {
				t.Errorf("failed on the recorder: %v\n%s", f, strings.Join(rec.Messages(""), "\n"))
			}
			if rec.Get("Plain/Atomic/CanceledNew") == nil || rec.Get("Prefixed/Isolation") == nil {
				t.Errorf("the recorder did not run the whole suite")
			}
		})
	}
}

// small lowers the large objects of a harness for the recorder's runs.
func small(h Harness) Harness {
	h.LargeObject, h.LargeObjectReason = 1<<20, "recorder runs check the suite, not the store"
	return h
}
