package toxinet

import (
	"context"
	"testing"
	"time"

	"github.com/redokit/redokit/backends/mem"
)

// The observer's side of the fault tier, on the in-memory backend (the
// faults themselves need toxiproxy, which the backends' tests bring).
func TestWatchAndWholeOrAbsent(t *testing.T) {
	b := mem.New()
	t.Cleanup(func() { b.Close() })
	data := []byte("the whole object")
	w := Watch(b, "k", data)
	WholeOrAbsent(t, b, "k", data, context.Canceled) // failed, nothing there
	if _, err := b.Put(context.Background(), "k", data, nil); err != nil {
		t.Fatal(err)
	}
	WholeOrAbsent(t, b, "k", data, nil)
	<-UntilVisible(context.Background(), b, "k", data, func() {})
	w.Finish(t)

	// Another content under the key is what the watcher exists to see.
	bad := Watch(b, "k", []byte("something else"))
	for bad.looks.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	close(bad.stop)
	<-bad.done
	if len(bad.bad) == 0 {
		t.Fatal("the watcher saw a wrong object and said nothing")
	}
}
