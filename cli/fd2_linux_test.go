package cli

import (
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// captureFD2 runs fn with file descriptor 2 redirected to a pipe and returns
// what was written to it: libraries that log to the process's stderr on
// their own (the MySQL driver's logger holds os.Stderr from its init) write
// there, not to the CLI's stderr writer.
func captureFD2(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := unix.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(int(w.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	defer func() {
		_ = unix.Dup3(saved, 2, 0)
		unix.Close(saved)
		w.Close()
	}()
	func() {
		defer func() {
			_ = unix.Dup3(saved, 2, 0)
		}()
		fn()
	}()
	w.Close()
	return <-done
}
