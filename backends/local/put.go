//go:build unix

package local

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

// StagesPuts implements driver.Stager: Put calls PutOptions.BeforeCommit once
// the temporary file is written and synced, before the rename.
func (d *Driver) StagesPuts() bool { return true }

// Put implements driver.Driver. See the package doc for the steps and why each
// is there.
func (d *Driver) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Attrs, error) {
	if err := checkKey(key); err != nil {
		return blob.Attrs{}, err
	}
	if opts.IfNotExist && opts.IfMatch != "" {
		return blob.Attrs{}, invalidf("IfNotExist and IfMatch are exclusive")
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, err
	}
	t, err := d.createTemp()
	if err != nil {
		return blob.Attrs{}, err
	}
	defer t.close(d)
	if err := t.fill(ctx, r, size); err != nil {
		return blob.Attrs{}, err
	}
	if err := d.enter(); err != nil {
		return blob.Attrs{}, err
	}
	defer d.exit()
	tmpFD, _, err := d.internalDirs()
	if err != nil {
		return blob.Attrs{}, err
	}
	if err := d.stamp(tmpFD, t.name, t.path()); err != nil {
		return blob.Attrs{}, err
	}
	if err := d.syncFile(t.fd, t.path(), false); err != nil {
		return blob.Attrs{}, err
	}
	// The last point where giving up leaves nothing behind.
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, err
	}
	// Staged and durable, not yet visible: the caller's last word
	// (driver.Stager).
	if opts.BeforeCommit != nil {
		if err := opts.BeforeCommit(ctx); err != nil {
			return blob.Attrs{}, err
		}
	}
	dir, name := splitKey(key)
	for attempt := 0; ; attempt++ {
		// A compare-and-swap needs an existing key, so it creates no
		// directories: a missing one means a failed precondition.
		p, err := d.openDirs(ctx, key, dir, opts.IfMatch == "")
		if err != nil {
			if opts.IfMatch != "" && d.ErrorCode(err) == blob.CodeNotExist {
				return blob.Attrs{}, preconditionf("key %q does not exist, so it cannot match ETag %s", key, opts.IfMatch)
			}
			return blob.Attrs{}, err
		}
		err = d.commit(ctx, key, p, name, tmpFD, t, opts)
		p.close()
		if err == errRetry && attempt < maxRetries {
			continue
		}
		if err != nil {
			return blob.Attrs{}, err
		}
		break
	}
	var st unix.Stat_t
	if err := unix.Fstat(t.fd, &st); err != nil {
		return blob.Attrs{}, pathErr("stat", key, err)
	}
	return attrsOf(key, &st), nil
}

// commit renames the temporary file onto key (name in the open directory
// path p) if opts allow, under the key's stripe lock, and syncs the
// directory. errRetry means p was pruned meanwhile.
func (d *Driver) commit(ctx context.Context, key string, p *dirs, name string, tmpFD int, t *tempFile, opts blob.PutOptions) error {
	unlock, err := d.lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	pfd := p.fd(d)
	if opts.IfMatch != "" {
		var st unix.Stat_t
		err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		switch {
		case err == unix.ENOENT && removed(pfd):
			return errRetry
		case err == unix.ENOENT, err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return preconditionf("key %q does not exist, so it cannot match ETag %s", key, opts.IfMatch)
		case err != nil:
			return pathErr("stat", key, err)
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return symlinkError(key)
		case etagOf(&st) != opts.IfMatch:
			return preconditionf("key %q has ETag %s, not %s", key, etagOf(&st), opts.IfMatch)
		}
	}
	if err := d.renameInto(ctx, key, tmpFD, t.name, pfd, name, opts.IfNotExist); err != nil {
		var ue *unlinkError
		if !errors.As(err, &ue) {
			return err
		}
		// The object is in place; the temporary name left behind is
		// removed by t.close or, failing that, by a later sweep.
		t.stale = true
	}
	t.renamed = true
	if err := d.trace("rename", key); err != nil {
		return err
	}
	return d.syncDir(pfd, p.path)
}

// renameInto renames oldName in oldDir onto name in the directory pfd (the
// key's directory), without replacing an existing object when noReplace. A
// directory in the way is removed if it is empty (a prune that lost a race
// left it) and is a conflict otherwise. errRetry means pfd was pruned.
func (d *Driver) renameInto(ctx context.Context, key string, oldDir int, oldName string, pfd int, name string, noReplace bool) error {
	retried := false
	for {
		var err error
		if noReplace {
			err = renameNoReplace(oldDir, oldName, pfd, name)
		} else {
			err = ignoringEINTR(func() error { return unix.Renameat(oldDir, oldName, pfd, name) })
		}
		switch err {
		case nil:
			return nil
		case unix.ENOENT:
			if removed(pfd) {
				return errRetry
			}
		case unix.EEXIST, unix.EISDIR, unix.ENOTEMPTY:
			var st unix.Stat_t
			if unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
				if !retried && unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR) == nil {
					retried = true
					continue
				}
				return d.dirConflict(ctx, key)
			}
			if err == unix.EEXIST {
				return preconditionf("key %q exists", key)
			}
		}
		var ue *unlinkError
		if errors.As(err, &ue) {
			return err
		}
		return pathErr("rename", key, err)
	}
}

// dirConflict is the error for key when a directory of keys is in its way;
// it names the first key below it.
func (d *Driver) dirConflict(ctx context.Context, key string) error {
	page, err := d.list(ctx, blob.ListOptions{Prefix: key + "/", PageSize: 1})
	if err == nil && len(page.Objects) > 0 {
		return conflictError(key, "key "+strconv.Quote(page.Objects[0].Key))
	}
	return conflictError(key, "directory "+strconv.Quote(key)+" (it holds no objects, only empty directories)")
}

// tempFile is a Put's temporary file in <root>/.redokit/tmp.
type tempFile struct {
	f       *os.File
	fd      int
	name    string
	renamed bool
	stale   bool // renamed by link, but the temporary name could not be removed
}

const tempSuffix = ".tmp"

func isTempName(name string) bool { return strings.HasSuffix(name, tempSuffix) }

func (t *tempFile) path() string { return internalName + "/tmp/" + t.name }

// createTemp creates and flocks a new temporary file. The flock tells a
// sweep, in any process, that the file is live.
func (d *Driver) createTemp() (*tempFile, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	defer d.exit()
	tmpFD, _, err := d.internalDirs()
	if err != nil {
		return nil, err
	}
	for range maxRetries {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(b[8:], rand.Uint64())
		name := hex.EncodeToString(b[:]) + tempSuffix
		fd, err := retryEINTR(func() (int, error) {
			return unix.Openat(tmpFD, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, d.filePerm)
		})
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return nil, pathErr("create", internalName+"/tmp/"+name, err)
		}
		// A sweep may have locked and removed the file between its creation
		// and our lock: then it holds the lock, or the file has no link.
		var st unix.Stat_t
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil || unix.Fstat(fd, &st) != nil || st.Nlink == 0 {
			unix.Close(fd)
			continue
		}
		return &tempFile{f: os.NewFile(uintptr(fd), internalName+"/tmp/"+name), fd: fd, name: name}, nil
	}
	return nil, pathErr("create", internalName+"/tmp", unix.EEXIST)
}

// close removes the temporary file, unless it was renamed and left no
// name behind, and closes it.
func (t *tempFile) close(d *Driver) {
	if (!t.renamed || t.stale) && d.enter() == nil {
		if tmpFD, _, err := d.internalDirs(); err == nil {
			unix.Unlinkat(tmpFD, t.name, 0)
		}
		d.exit()
	}
	// Closing releases the flock: a sweep may now remove whatever is left.
	t.f.Close()
}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// fill copies r (size bytes, or to EOF when size < 0) into the file,
// checking ctx before each read.
func (t *tempFile) fill(ctx context.Context, r io.Reader, size int64) error {
	var src io.Reader = &ctxReader{ctx: ctx, r: r}
	if size >= 0 {
		// One byte more than size, to tell a reader longer than promised.
		src = io.LimitReader(src, size+1)
	}
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	// writerOnly hides os.File's ReadFrom, which would bypass ctxReader.
	n, err := io.CopyBuffer(writerOnly{t.f}, src, *buf)
	if err != nil {
		return err
	}
	if size >= 0 && n != size {
		if n > size {
			return invalidf("the reader holds more than the %d bytes the size says", size)
		}
		return invalidf("the reader held %d bytes, the size says %d", n, size)
	}
	return nil
}

type writerOnly struct{ io.Writer }

// ctxReader fails a read once ctx has ended, so that a canceled Put stops
// copying.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// stamp sets the mtime of name in dirFD to now, in whole microseconds, plus
// a random 0-999 ns: the ETag nonce (see the package doc).
func (d *Driver) stamp(dirFD int, name, path string) error {
	now := time.Now().UnixNano()
	ns := now - now%1000 + rand.Int64N(1000)
	t := unix.NsecToTimespec(ns)
	ts := []unix.Timespec{t, t} // atime, mtime: nothing reads the atime
	if err := unix.UtimesNanoAt(dirFD, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return pathErr("utimensat", path, err)
	}
	return nil
}

// attrsOf returns the attributes of the object key whose file has st.
func attrsOf(key string, st *unix.Stat_t) blob.Attrs {
	return blob.Attrs{Key: key, Size: st.Size, ETag: etagOf(st), ModTime: time.Unix(st.Mtim.Unix())}
}

// etagOf is "<inode>-<mtime ns>-<size>" in hex (see the package doc).
func etagOf(st *unix.Stat_t) string {
	b := make([]byte, 0, 48)
	b = strconv.AppendUint(b, uint64(st.Ino), 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, st.Mtim.Nano(), 16)
	b = append(b, '-')
	b = strconv.AppendInt(b, st.Size, 16)
	return string(b)
}
