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
//
// It reads the directory in one getdents64 call when it can: the kernel
// holds the directory's lock for the whole of one call, and every rename,
// create or unlink in it takes that lock, so one call is a snapshot. A read
// of several calls is not: an entry renamed between two of them can have
// its new name in the part already read and its old one in the part not
// yet read, and be listed under neither. So the buffer is sized from the
// directory's size, a call that may have filled it is done again with a
// buffer four times larger, and a second call must find nothing more (a
// file system that returns short reads is caught there). Past
// maxSnapshotDir bytes of entries, on such a file system, or when the
// directory keeps changing between the two calls, it reads in several
// calls, taken only if the directory's change and modification times did
// not move (dirStill; else errDirChanged, and the walk reads again).
func readDir(dirFD int) ([]dirent, error) {
	var st unix.Stat_t
	if err := unix.Fstat(dirFD, &st); err != nil {
		return nil, err
	}
	size := 32 << 10
	if st.Size > 0 {
		size = max(size, int(min(st.Size, maxSnapshotDir))*2+maxDirent)
	}
	for attempt := 0; size <= maxSnapshotDir && attempt < 8; attempt++ {
		out, whole, full, err := readDirOnce(dirFD, size)
		if err != nil || whole {
			return out, err
		}
		if full {
			size *= 4
		}
	}
	ents, err := readDirCalls(dirFD)
	if err != nil {
		return nil, err
	}
	return ents, dirStill(dirFD, &st)
}

// maxSnapshotDir bounds the buffer of a one-call read (readDir): about a
// million entries of short names.
const maxSnapshotDir = 64 << 20

// maxDirent is the largest linux_dirent64 record: a 255-byte name.
const maxDirent = (direntNameOff + 255 + 1 + 7) &^ 7

// readDirOnce reads the directory with one getdents64 call into a buffer of
// size bytes. whole says the call held every entry (a second call found
// none); full that the call may have filled the buffer.
func readDirOnce(dirFD, size int) (out []dirent, whole, full bool, err error) {
	fd, err := openDirAt(dirFD, ".")
	if err != nil {
		return nil, false, false, err
	}
	defer unix.Close(fd)
	buf := make([]byte, size)
	n, err := retryEINTR(func() (int, error) { return unix.Getdents(fd, buf) })
	if err != nil || n <= 0 {
		return nil, err == nil, false, err
	}
	if n > size-maxDirent {
		return nil, false, true, nil
	}
	if out, err = parseDirents(out, buf[:n]); err != nil {
		return nil, false, false, err
	}
	more, err := retryEINTR(func() (int, error) { return unix.Getdents(fd, buf[:maxDirent]) })
	if err != nil {
		return nil, false, false, err
	}
	return out, more <= 0, false, nil
}

// readDirCalls reads the directory in as many getdents64 calls as it takes.
func readDirCalls(dirFD int) ([]dirent, error) {
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
		if out, err = parseDirents(out, buf[:n]); err != nil {
			return nil, err
		}
	}
}

// parseDirents appends the entries of a getdents64 answer b to out.
func parseDirents(out []dirent, b []byte) ([]dirent, error) {
	// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen;
	// u8 d_type; char d_name[]; } with d_name NUL-terminated and padded.
	for len(b) > 0 {
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
	return out, nil
}

const direntNameOff = 19
