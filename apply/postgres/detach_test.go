package postgres

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// TestDetachedCopySourceKeepsItsBufferSafe: once detach has returned, no
// read of the source is under way and none reads its buffer again, so the
// buffer may be written at once. Run with -race: a detach that does not wait
// for the reads in flight shows as a race on buf.
func TestDetachedCopySourceKeepsItsBufferSafe(t *testing.T) {
	for range 200 {
		buf := bytes.Repeat([]byte{'r'}, 1<<16)
		src := &detachable{r: bytes.NewReader(buf)}
		var wg sync.WaitGroup
		var last error
		wg.Go(func() { // as pgx's copy goroutine, which may outlive CopyFrom
			p := make([]byte, 512)
			for {
				if _, err := src.Read(p); err != nil {
					last = err
					return
				}
			}
		})
		src.detach()
		buf[0] = 'x' // the next try's rows, in the same buffer
		wg.Wait()
		if last != nil && !errors.Is(last, errDetached) && last.Error() != "EOF" {
			t.Fatalf("read error %v", last)
		}
		if n, err := src.Read(make([]byte, 8)); n != 0 || !errors.Is(err, errDetached) {
			t.Fatalf("read after detach: %d, %v", n, err)
		}
	}
}
