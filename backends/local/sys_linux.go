//go:build linux

package local

import (
	"bytes"
	"encoding/binary"

	"golang.org/x/sys/unix"
)

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

// startWriteback starts writing a file's range out without waiting.
func startWriteback(fd int, off, n int64) error {
	return unix.SyncFileRange(fd, off, n, unix.SYNC_FILE_RANGE_WRITE)
}

// readDir reads every entry of the directory dirFD but "." and "..", from a
// fresh open file description (the offset that reading moves must not be
// shared with concurrent listings). It calls getdents64 itself rather than
// os.File.ReadDir, which silently drops an entry of unknown type (DT_UNKNOWN)
// that vanishes before its lstat: the walk must see that happen.
func readDir(dirFD int) ([]dirent, error) {
	fd, err := openDirAt(dirFD, ".")
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []dirent
	buf := make([]byte, 32<<10)
	for {
		n, err := retryEINTR(func() (int, error) { return unix.Getdents(fd, buf) })
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen;
		// u8 d_type; char d_name[]; } with d_name NUL-terminated and padded.
		for b := buf[:n]; len(b) > 0; {
			if len(b) < direntNameOff {
				return nil, unix.EIO
			}
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < direntNameOff || reclen > len(b) {
				return nil, unix.EIO
			}
			typ, name := b[18], b[direntNameOff:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if s := string(name); s != "." && s != ".." {
				k := kindOther
				switch typ {
				case unix.DT_DIR:
					k = kindDir
				case unix.DT_UNKNOWN:
					k = kindUnknown
				}
				out = append(out, dirent{name: s, kind: k})
			}
		}
	}
}

const direntNameOff = 19
