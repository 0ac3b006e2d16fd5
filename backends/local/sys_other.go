//go:build unix && !linux

package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames oldName in oldDir to newName in newDir unless
// newName exists (EEXIST), atomically, with link(2) and unlink(2).
func renameNoReplace(oldDir int, oldName string, newDir int, newName string) error {
	return linkNoReplace(oldDir, oldName, newDir, newName)
}

// fdatasync falls back to fsync where the system has no fdatasync.
func fdatasync(fd int) error { return unix.Fsync(fd) }

// startWriteback does nothing where there is no sync_file_range: the
// hint is only a hint.
func startWriteback(int, int64, int64) error { return nil }

// readDir reads the names of every entry of the directory dirFD but "." and
// "..", from a fresh open file description. Their types are left to the walk,
// which stats each one: os.File.ReadDir would silently drop an entry that
// vanishes before its own lstat. The read may take several calls, which are
// not a snapshot (see the Linux readDir): it is taken only if the
// directory's change and modification times did not move (dirStill).
func readDir(dirFD int) ([]dirent, error) {
	var st unix.Stat_t
	if err := unix.Fstat(dirFD, &st); err != nil {
		return nil, err
	}
	fd, err := openDirAt(dirFD, ".")
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]dirent, 0, len(names))
	for _, n := range names {
		if n != "." && n != ".." {
			out = append(out, dirent{name: n, kind: kindUnknown})
		}
	}
	return out, dirStill(dirFD, &st)
}
