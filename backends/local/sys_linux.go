//go:build linux

package local

import "golang.org/x/sys/unix"

// renameNoReplace renames oldName in oldDir to newName in newDir unless
// newName exists (EEXIST), atomically: renameat2(RENAME_NOREPLACE), or, on a
// file system that lacks it, link(2) and unlink(2).
func renameNoReplace(oldDir int, oldName string, newDir int, newName string) error {
	err := ignoringEINTR(func() error {
		return unix.Renameat2(oldDir, oldName, newDir, newName, unix.RENAME_NOREPLACE)
	})
	switch err {
	case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP:
		return linkNoReplace(oldDir, oldName, newDir, newName)
	}
	return err
}

// fdatasync syncs a file's data and the metadata needed to read it back
// (its size), but not its timestamps.
func fdatasync(fd int) error { return unix.Fdatasync(fd) }
