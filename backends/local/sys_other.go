//go:build unix && !linux

package local

import "golang.org/x/sys/unix"

// renameNoReplace renames oldName in oldDir to newName in newDir unless
// newName exists (EEXIST), atomically, with link(2) and unlink(2).
func renameNoReplace(oldDir int, oldName string, newDir int, newName string) error {
	return linkNoReplace(oldDir, oldName, newDir, newName)
}

// fdatasync falls back to fsync where the system has no fdatasync.
func fdatasync(fd int) error { return unix.Fsync(fd) }
