//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

func init() {
	blob.Register("file", openURL)
}

// openURL opens "file:///abs/dir[?create_dir=true]".
func openURL(_ context.Context, u *url.URL) (*blob.Bucket, error) {
	if err := blob.CheckQuery(u, "create_dir"); err != nil {
		return nil, err
	}
	var opts Options
	if v := u.Query().Get("create_dir"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: create_dir=%q is not a boolean", blob.ErrInvalidArgument, v)
		}
		opts.CreateDir = b
	}
	switch {
	case u.Opaque != "":
		return nil, fmt.Errorf("%w: the path %q is relative; a file URL needs an absolute path (file:///abs/dir)", blob.ErrInvalidArgument, u.Opaque)
	case u.Host != "" && u.Host != "localhost":
		return nil, fmt.Errorf("%w: the file URL has host %q; write file:///abs/dir (three slashes) for an absolute path", blob.ErrInvalidArgument, u.Host)
	case u.Path == "":
		return nil, fmt.Errorf("%w: the file URL has an empty path; want file:///abs/dir", blob.ErrInvalidArgument)
	}
	return New(u.Path, &opts)
}

// Options configure a Driver. The zero value (and nil) are the safe defaults.
type Options struct {
	// CreateDir creates the root (and its missing parents) if it is missing.
	CreateDir bool
	// NoSync skips every fsync and fdatasync. It is UNSAFE: an acknowledged
	// write may be lost, and a crash may leave a renamed but empty object.
	// For benchmarks that measure everything but the disk.
	NoSync bool
	// DirPerm is the permission of directories the driver creates (before
	// the umask); 0 means 0o755.
	DirPerm fs.FileMode
	// FilePerm is the permission of files the driver creates (before the
	// umask); 0 means 0o644.
	FilePerm fs.FileMode
}

// Driver is the file-system driver.Driver. Create one with NewDriver, or a
// Bucket over one with New. It is safe for concurrent use, and any number of
// processes may use the same root at once.
type Driver struct {
	root     string // absolute, cleaned
	noSync   bool
	dirPerm  uint32
	filePerm uint32

	// life guards the descriptors below against Close: operations that use
	// them hold it for reading, Close takes it for writing.
	life   sync.RWMutex
	closed bool
	rootFD int

	// internal holds the lazily opened descriptors of <root>/.redokit.
	internal struct {
		sync.Mutex
		tmpFD  int // -1 until opened
		lockFD int // -1 until opened
	}
	stripes [numStripes]stripe

	// durable remembers the directories whose entry in their parent this
	// driver has fsynced, by path and inode (a pruned and re-created
	// directory has a new inode, and must be synced again).
	durable sync.Map // string -> uint64

	// hook, when set (by tests only), is called at each step that matters
	// for durability; an error it returns for a sync replaces that sync.
	hook func(op, path string) error
}

var (
	_ driver.Driver   = (*Driver)(nil)
	_ driver.Appender = (*Driver)(nil)
)

// New returns a Bucket over a new Driver rooted at root (see NewDriver).
// opts may be nil.
func New(root string, opts *Options) (*blob.Bucket, error) {
	d, err := NewDriver(root, opts)
	if err != nil {
		return nil, err
	}
	return blob.NewBucket(d), nil
}

// NewDriver returns a Driver rooted at the directory root, which must be an
// absolute path and must exist (unless opts.CreateDir) and be a directory.
// opts may be nil.
func NewDriver(root string, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if root == "" {
		return nil, fmt.Errorf("%w: local: empty root path", blob.ErrInvalidArgument)
	}
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("%w: local: root %q is not an absolute path", blob.ErrInvalidArgument, root)
	}
	root = filepath.Clean(root)
	d := &Driver{root: root, noSync: o.NoSync, dirPerm: 0o755, filePerm: 0o644}
	if o.DirPerm != 0 {
		d.dirPerm = uint32(o.DirPerm.Perm())
	}
	if o.FilePerm != 0 {
		d.filePerm = uint32(o.FilePerm.Perm())
	}
	d.internal.tmpFD, d.internal.lockFD = -1, -1
	for i := range d.stripes {
		d.stripes[i].sem = make(chan struct{}, 1)
	}
	if o.CreateDir {
		if err := d.createRoot(); err != nil {
			return nil, err
		}
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%w: local: root %s is not a directory", blob.ErrInvalidArgument, root)
		}
		return nil, &os.PathError{Op: "local: open root", Path: root, Err: err}
	}
	d.rootFD = fd
	return d, nil
}

// createRoot is mkdir -p of the root, with each created directory's entry
// synced into its parent so that the root survives a crash.
func (d *Driver) createRoot() error {
	var missing []string
	for p := d.root; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil || p == filepath.Dir(p) {
			break
		}
		missing = append(missing, p)
	}
	if err := os.MkdirAll(d.root, fs.FileMode(d.dirPerm)); err != nil {
		return fmt.Errorf("local: create root: %w", err)
	}
	for _, p := range missing {
		if err := d.syncPath(filepath.Dir(p)); err != nil {
			return fmt.Errorf("local: create root: %w", err)
		}
	}
	return nil
}

// syncPath fsyncs the directory at the absolute path p.
func (d *Driver) syncPath(p string) error {
	if d.noSync {
		return nil
	}
	fd, err := retryEINTR(func() (int, error) {
		return unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	return d.syncDir(fd, p)
}

// Root returns the absolute path of the driver's root directory.
func (d *Driver) Root() string { return d.root }

// enter marks the start of an operation that uses the driver's descriptors;
// exit (deferred) its end.
func (d *Driver) enter() error {
	d.life.RLock()
	if d.closed {
		d.life.RUnlock()
		return blob.ErrClosed
	}
	return nil
}

func (d *Driver) exit() { d.life.RUnlock() }

// isClosed reports whether Close has been called, for the methods of open
// append files, which use descriptors of their own.
func (d *Driver) isClosed() bool {
	d.life.RLock()
	defer d.life.RUnlock()
	return d.closed
}

// Close implements driver.Driver. It waits for running operations that use the
// root's descriptors; later operations fail with blob.ErrClosed. Files open for
// appending must be closed by their owners.
func (d *Driver) Close() error {
	d.life.Lock()
	defer d.life.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	err := unix.Close(d.rootFD)
	d.internal.Lock()
	for _, fd := range []int{d.internal.tmpFD, d.internal.lockFD} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	d.internal.tmpFD, d.internal.lockFD = -1, -1
	d.internal.Unlock()
	for i := range d.stripes {
		d.stripes[i].close()
	}
	return err
}

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) blob.Code {
	if c, ok := driver.ContextCode(err); ok {
		return c
	}
	switch {
	case errors.Is(err, blob.ErrPreconditionFailed):
		return blob.CodePreconditionFailed
	case errors.Is(err, blob.ErrInvalidKey), errors.Is(err, blob.ErrInvalidArgument):
		return blob.CodeInvalidArgument
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		// ENOTDIR: a path component is a file, so the key cannot exist.
		return blob.CodeNotExist
	case errors.Is(err, unix.EEXIST):
		return blob.CodePreconditionFailed
	case errors.Is(err, fs.ErrPermission), errors.Is(err, unix.EROFS):
		return blob.CodePermissionDenied
	case errors.Is(err, unix.ENAMETOOLONG), errors.Is(err, unix.ELOOP):
		return blob.CodeInvalidArgument
	case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
		return blob.CodeTransient
	}
	return blob.CodeOf(err)
}

// trace calls the test hook, if any.
func (d *Driver) trace(op, path string) error {
	if d.hook == nil {
		return nil
	}
	return d.hook(op, path)
}

// syncFile makes a file durable: its data and, unless dataOnly, all of its
// metadata. path names it for the hook and for errors.
func (d *Driver) syncFile(fd int, path string, dataOnly bool) error {
	if d.noSync {
		return nil
	}
	if err := d.trace("sync-file", path); err != nil {
		return &os.PathError{Op: "fsync", Path: path, Err: err}
	}
	var err error
	if dataOnly {
		err = ignoringEINTR(func() error { return fdatasync(fd) })
	} else {
		err = ignoringEINTR(func() error { return unix.Fsync(fd) })
	}
	if err != nil {
		return &os.PathError{Op: "fsync", Path: path, Err: err}
	}
	return nil
}

// syncDir makes a directory's entries durable. path is relative to the root
// ("" for the root) for the hook, or absolute for errors outside the root.
func (d *Driver) syncDir(fd int, path string) error {
	if d.noSync {
		return nil
	}
	if err := d.trace("sync-dir", path); err != nil {
		return &os.PathError{Op: "fsync dir", Path: path, Err: err}
	}
	if err := ignoringEINTR(func() error { return unix.Fsync(fd) }); err != nil {
		return &os.PathError{Op: "fsync dir", Path: path, Err: err}
	}
	return nil
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); err != unix.EINTR {
			return err
		}
	}
}

func retryEINTR[T any](f func() (T, error)) (T, error) {
	for {
		v, err := f()
		if err != unix.EINTR {
			return v, err
		}
	}
}
