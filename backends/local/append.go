//go:build unix

package local

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

// OpenAppend implements driver.Appender. See the package doc.
func (d *Driver) OpenAppend(ctx context.Context, key string) (blob.AppendFile, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	dir, name := splitKey(key)
	var a *appendFile
	err := d.inDirs(ctx, key, dir, func(p *dirs) (err error) {
		a, err = d.openAppendIn(ctx, key, p, name)
		return err
	})
	return a, err
}

// inDirs runs op in the directories of dir, opened (and created) by
// openDirs, and again, at most maxRetries more times, while it returns
// errRetry (they were pruned meanwhile).
func (d *Driver) inDirs(ctx context.Context, key, dir string, op func(p *dirs) error) error {
	for attempt := 0; ; attempt++ {
		p, err := d.openDirs(ctx, key, dir, true)
		if err != nil {
			return err
		}
		err = op(p)
		p.close()
		if err != errRetry || attempt == maxRetries {
			return err
		}
	}
}

func (d *Driver) openAppendIn(ctx context.Context, key string, p *dirs, name string) (*appendFile, error) {
	pfd := p.fd(d)
	// O_NONBLOCK keeps a FIFO planted under the root from blocking the open;
	// it is cleared once the file is known to be regular.
	const flags = unix.O_WRONLY | unix.O_APPEND | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	fd, err := retryEINTR(func() (int, error) { return unix.Openat(pfd, name, flags|unix.O_CREAT|unix.O_EXCL, d.filePerm) })
	created := err == nil
	if err == unix.EEXIST {
		fd, err = retryEINTR(func() (int, error) { return unix.Openat(pfd, name, flags, 0) })
		if err == unix.ENOENT {
			return nil, errRetry // deleted between the two opens
		}
	}
	switch err {
	case nil:
	case unix.ENOENT:
		if removed(pfd) {
			return nil, errRetry
		}
		return nil, pathErr("open", key, err)
	case unix.ELOOP, unix.EMLINK:
		return nil, symlinkError(key)
	case unix.EISDIR:
		return nil, d.dirConflict(ctx, key)
	case unix.ENXIO:
		return nil, invalidf("%q is not a regular file", key) // a FIFO or socket
	default:
		return nil, pathErr("open", key, err)
	}
	a := &appendFile{d: d, fd: fd, dirFD: -1, key: key, dirPath: p.path, name: name}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		a.release()
		return nil, pathErr("stat", key, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		a.release()
		return nil, invalidf("%q is not a regular file", key)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		a.release()
		return nil, pathErr("fcntl", key, err)
	}
	// One appender per key, across processes: interleaved appends would tear
	// records that each writer believes synced.
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		a.release()
		if err == unix.EWOULDBLOCK {
			return nil, preconditionf("key %q is open for appending elsewhere", key)
		}
		return nil, pathErr("flock", key, err)
	}
	a.size = st.Size
	// The directory is kept open for Seal's rename and sync: it cannot be
	// pruned while it holds this file.
	if a.dirFD, err = unix.FcntlInt(uintptr(pfd), unix.F_DUPFD_CLOEXEC, 0); err != nil {
		a.dirFD = -1
		a.release()
		return nil, pathErr("dup", p.path, err)
	}
	if created {
		if err := d.trace("create", key); err != nil {
			a.release()
			return nil, err
		}
		if err := d.syncDir(pfd, p.path); err != nil {
			a.release()
			return nil, err
		}
	}
	a.f = os.NewFile(uintptr(fd), key)
	return a, nil
}

// appendFile is a key's file open for appending.
type appendFile struct {
	d       *Driver
	f       *os.File // nil until fully opened
	fd      int
	dirFD   int    // the directory holding the file
	dirPath string // its path, relative to the root
	name    string // the file's name in it
	key     string
	size    int64
	done    bool // sealed or closed
}

var (
	_ blob.AppendFile       = (*appendFile)(nil)
	_ blob.WritebackStarter = (*appendFile)(nil)
)

// usable reports why the file cannot be used, if it cannot.
func (a *appendFile) usable() error {
	switch {
	case a.done:
		return os.ErrClosed
	case a.d.isClosed():
		return blob.ErrClosed
	}
	return nil
}

func (a *appendFile) Write(p []byte) (int, error) {
	if err := a.usable(); err != nil {
		return 0, err
	}
	n, err := a.f.Write(p)
	a.size += int64(n)
	return n, err
}

func (a *appendFile) Size() int64 { return a.size }

func (a *appendFile) Sync() error {
	if err := a.usable(); err != nil {
		return err
	}
	return a.d.syncFile(a.fd, a.key, true)
}

// StartWriteback implements driver.WritebackStarter. Linux starts writing
// the range out (sync_file_range(2) with SYNC_FILE_RANGE_WRITE alone, which
// waits for nothing and leaves the file's write-back error for the next
// fdatasync to report); elsewhere it does nothing.
func (a *appendFile) StartWriteback(off, n int64) error {
	if err := a.usable(); err != nil {
		return err
	}
	if a.d.noSync || n <= 0 {
		return nil
	}
	if err := ignoringEINTR(func() error { return startWriteback(a.fd, off, n) }); err != nil {
		return pathErr("sync_file_range", a.key, err)
	}
	return nil
}

func (a *appendFile) Truncate(size int64) error {
	if err := a.usable(); err != nil {
		return err
	}
	if size < 0 {
		return invalidf("negative size %d", size)
	}
	if err := ignoringEINTR(func() error { return unix.Ftruncate(a.fd, size) }); err != nil {
		return pathErr("truncate", a.key, err)
	}
	a.size = size
	// A full fsync: the new size is metadata that fdatasync need not write
	// when the file shrinks.
	return a.d.syncFile(a.fd, a.key, false)
}

// Seal implements blob.AppendFile. If the rename fails, the file stays open
// under its key, and Seal may be called again.
func (a *appendFile) Seal(ctx context.Context, finalKey string) (blob.Attrs, error) {
	if err := a.usable(); err != nil {
		return blob.Attrs{}, err
	}
	if err := checkKey(finalKey); err != nil {
		return blob.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, err
	}
	d := a.d
	if err := d.enter(); err != nil {
		return blob.Attrs{}, err
	}
	defer d.exit()
	// A fresh mtime gives the sealed object a fresh ETag; the fsync makes
	// it, the data and the size durable before the name changes.
	if err := d.stamp(a.dirFD, a.name, a.key); err != nil {
		return blob.Attrs{}, err
	}
	if err := d.syncFile(a.fd, a.key, false); err != nil {
		return blob.Attrs{}, err
	}
	dir, name := splitKey(finalKey)
	if err := d.inDirs(ctx, finalKey, dir, func(p *dirs) error { return a.sealInto(ctx, finalKey, p, name) }); err != nil {
		return blob.Attrs{}, err
	}
	var st unix.Stat_t
	err := unix.Fstat(a.fd, &st)
	a.release()
	if err != nil {
		return blob.Attrs{}, pathErr("stat", finalKey, err)
	}
	return attrsOf(finalKey, &st), nil
}

// sealInto renames the file onto finalKey (name in the open directory path p)
// under the final key's stripe lock, never replacing, and syncs both
// directories.
func (a *appendFile) sealInto(ctx context.Context, finalKey string, p *dirs, name string) error {
	d := a.d
	unlock, err := d.lock(ctx, finalKey)
	if err != nil {
		return err
	}
	defer unlock()
	pfd := p.fd(d)
	if err := d.renameInto(ctx, finalKey, a.dirFD, a.name, pfd, name, true); err != nil {
		var ue *unlinkError
		if errors.As(err, &ue) {
			// Sealed, but the old name remains: report it, and do not let
			// the caller write on under a name that is now also finalKey.
			a.release()
		}
		return err
	}
	if err := d.trace("rename", finalKey); err != nil {
		a.release()
		return err
	}
	err = d.syncDir(pfd, p.path)
	if p.path != a.dirPath {
		err = errors.Join(err, d.syncDir(a.dirFD, a.dirPath))
	}
	if err != nil {
		a.release() // renamed: the old key is gone either way
	}
	return err
}

// Close implements blob.AppendFile: it closes the file, which stays under its
// key. A second Close does nothing.
func (a *appendFile) Close() error {
	if a.done {
		return nil
	}
	var err error
	if a.f != nil {
		err = a.f.Close()
		a.f = nil
		a.fd = -1
	}
	a.release()
	return err
}

// release closes the descriptors (dropping the flock) and ends the file's
// use.
func (a *appendFile) release() {
	if a.f != nil {
		a.f.Close()
		a.f = nil
	} else if a.fd >= 0 {
		unix.Close(a.fd)
	}
	a.fd = -1
	if a.dirFD >= 0 {
		unix.Close(a.dirFD)
		a.dirFD = -1
	}
	a.done = true
}
