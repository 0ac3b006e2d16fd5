package main

import (
	"os"
	"syscall"
)

// fdatasync is what the local backend does to an appended segment.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
