package gc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redokit/redokit/backends/mem"
	"github.com/redokit/redokit/gc"
)

// GC runs on its own schedule and reads the checkpoint itself; a Kick after
// the checkpoint moves collects sooner.
func ExampleStart() {
	ctx := context.Background()
	b := mem.New()
	defer b.Close()
	done := make(chan *gc.Result, 1)
	s := gc.Start(ctx, b, "cf", &gc.SchedulerOptions{
		Interval: time.Minute,
		OnCycle: func(r *gc.Result, err error) {
			if err != nil {
				fmt.Println("cycle failed:", err)
			}
			done <- r
		},
	})
	defer s.Close()
	s.Kick()
	<-done // the log has no meta object yet: the cycle fails and deletes nothing
	// Output: cycle failed: gc: read the checkpoint: blob: read "cf/meta": not exist: no such object
}
