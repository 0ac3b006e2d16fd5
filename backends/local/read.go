//go:build unix

package local

import (
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

// NewRangeReader implements driver.Driver. The reader reads the file it opened,
// so a later Put or Delete of the key does not disturb it; with length < 0 it
// reads to the end of the file at the time of each read (an active segment
// being appended to can be followed).
func (d *Driver) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, invalidf("negative offset %d", offset)
	}
	f, _, err := d.openRead(ctx, key)
	if err != nil {
		return nil, err
	}
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, pathErr("seek", key, err)
		}
	}
	var r io.Reader = f
	if length >= 0 {
		r = io.LimitReader(f, length)
	}
	return &fileReader{f: f, r: &ctxReader{ctx: ctx, r: r}}, nil
}

var _ driver.VersionReader = (*Driver)(nil)

// ReadVersion implements driver.VersionReader: the attributes are those of
// the file opened (fstat of its descriptor), which a rename replacing the
// key afterwards does not change, so bytes and ETag are of one version.
func (d *Driver) ReadVersion(ctx context.Context, key string) ([]byte, blob.Attrs, error) {
	f, st, err := d.openRead(ctx, key)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(&ctxReader{ctx: ctx, r: f})
	if err != nil {
		return nil, blob.Attrs{}, pathErr("read", key, err)
	}
	if int64(len(data)) != st.Size {
		// Appended to while read: not one version (metadata objects are
		// never appended to; segments are read by range).
		return nil, blob.Attrs{}, pathErr("read", key, fmt.Errorf("the file changed size while read (%d bytes, then %d)", st.Size, len(data)))
	}
	return data, attrsOf(key, &st), nil
}

// openRead opens the regular file of key for reading, with its stat.
func (d *Driver) openRead(ctx context.Context, key string) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := checkKey(key); err != nil {
		return nil, st, err
	}
	if err := ctx.Err(); err != nil {
		return nil, st, err
	}
	if err := d.enter(); err != nil {
		return nil, st, err
	}
	defer d.exit()
	dir, name := splitKey(key)
	p, err := d.openDirs(ctx, key, dir, false)
	if err != nil {
		return nil, st, err
	}
	defer p.close()
	// O_NONBLOCK keeps a FIFO planted under the root from blocking the open;
	// it is cleared once the file is known to be regular.
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(p.fd(d), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	switch err {
	case nil:
	case unix.ENOENT:
		return nil, st, notExist(key)
	case unix.ELOOP, unix.EMLINK:
		return nil, st, symlinkError(key)
	default:
		return nil, st, pathErr("open", key, err)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, pathErr("stat", key, err)
	}
	if err := notRegular(key, &st); err != nil {
		unix.Close(fd)
		return nil, st, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, st, pathErr("fcntl", key, err)
	}
	return os.NewFile(uintptr(fd), key), st, nil
}

type fileReader struct {
	f *os.File
	r io.Reader
}

func (r *fileReader) Read(p []byte) (int, error) { return r.r.Read(p) }
func (r *fileReader) Close() error               { return r.f.Close() }

// Stat implements driver.Driver.
func (d *Driver) Stat(ctx context.Context, key string) (blob.Attrs, error) {
	if err := checkKey(key); err != nil {
		return blob.Attrs{}, err
	}
	if err := ctx.Err(); err != nil {
		return blob.Attrs{}, err
	}
	if err := d.enter(); err != nil {
		return blob.Attrs{}, err
	}
	defer d.exit()
	dir, name := splitKey(key)
	p, err := d.openDirs(ctx, key, dir, false)
	if err != nil {
		return blob.Attrs{}, err
	}
	defer p.close()
	var st unix.Stat_t
	switch err := unix.Fstatat(p.fd(d), name, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == unix.ENOENT:
		return blob.Attrs{}, notExist(key)
	case err != nil:
		return blob.Attrs{}, pathErr("stat", key, err)
	}
	if err := notRegular(key, &st); err != nil {
		return blob.Attrs{}, err
	}
	return attrsOf(key, &st), nil
}

// notRegular explains why the file key, described by st (not following a
// link), is not an object, or returns nil for a regular file. A directory is
// only a directory of keys: no object is there. A link or a special file is
// something the store holds and List shows, so it is an error naming it, not
// a missing object a caller could take for one deleted meanwhile.
func notRegular(key string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return notExist(key)
	case unix.S_IFLNK:
		return symlinkError(key)
	}
	return invalidf("%q is not a regular file (mode %#o); the local backend reads only regular files", key, st.Mode&unix.S_IFMT)
}
