//go:build unix

package local

import (
	"context"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

// internalName is the root entry that holds the driver's own files. No key
// may start with it (see checkKey), and List skips it.
const internalName = ".redokit"

// checkKey validates a key given to the driver. Bucket validates keys too, but
// the driver may be used bare, and validation is what keeps ".." out.
func checkKey(key string) error {
	if err := blob.ValidateKey(key); err != nil {
		return err
	}
	if first, _, _ := strings.Cut(key, "/"); first == internalName {
		return invalidKeyf("key %q: the name %q is reserved by the local backend", key, internalName)
	}
	return nil
}

// splitKey returns the directory part of key ("" at the root) and its last
// segment.
func splitKey(key string) (dir, name string) {
	i := strings.LastIndexByte(key, '/')
	if i < 0 {
		return "", key
	}
	return key[:i], key[i+1:]
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// dirs is an open directory path below the root: fds[i] is the directory
// named by the first i+1 segments of path.
type dirs struct {
	path string // relative to the root; "" is the root
	fds  []int
}

// fd returns the descriptor of the last directory (the root's, owned by the
// driver, for the root itself).
func (p *dirs) fd(d *Driver) int {
	if len(p.fds) == 0 {
		return d.rootFD
	}
	return p.fds[len(p.fds)-1]
}

func (p *dirs) close() {
	if p == nil {
		return
	}
	for _, fd := range p.fds {
		unix.Close(fd)
	}
	p.fds = nil
}

func openDirAt(dirFD int, name string) (int, error) {
	return retryEINTR(func() (int, error) {
		return unix.Openat(dirFD, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
}

// openDirs opens the directory dir ("" for the root) one segment at a time
// from the root, never following a link. With create, missing directories are
// created, and every directory on the path is made durable in its parent (see
// ensureDurable). key names the operation's key in errors. A path that a
// concurrent prune removes is re-opened.
//
// Without create, a missing directory, or a file where a directory should be,
// is a not-exist error for key.
func (d *Driver) openDirs(ctx context.Context, key, dir string, create bool) (*dirs, error) {
	for attempt := 0; ; attempt++ {
		p, err := d.openDirsOnce(key, dir, create)
		if err != errRetry {
			return p, err
		}
		if attempt == maxRetries {
			return nil, pathErr("open", dir, unix.ENOENT)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func (d *Driver) openDirsOnce(key, dir string, create bool) (*dirs, error) {
	p := &dirs{path: dir}
	if dir == "" {
		return p, nil
	}
	cur, curPath := d.rootFD, ""
	for seg := range strings.SplitSeq(dir, "/") {
		subPath := joinPath(curPath, seg)
		fd, err := openDirAt(cur, seg)
		created := false
		if err == unix.ENOENT && create {
			switch err = unix.Mkdirat(cur, seg, d.dirPerm); err {
			case nil:
				created = true
				if err := d.trace("mkdir", subPath); err != nil {
					p.close()
					return nil, err
				}
				if err := d.syncDir(cur, curPath); err != nil {
					p.close()
					return nil, err
				}
			case unix.EEXIST:
				// Another creator won, or a file is in the way: the open
				// below tells which.
			case unix.ENOENT:
				p.close()
				return nil, errRetry // cur itself was removed
			default:
				p.close()
				return nil, pathErr("mkdir", subPath, err)
			}
			fd, err = openDirAt(cur, seg)
		}
		if err != nil {
			defer p.close()
			switch err {
			case unix.ENOENT:
				if create {
					return nil, errRetry // created, then pruned before we opened it
				}
				return nil, notExist(key)
			case unix.ENOTDIR, unix.ELOOP, unix.EMLINK:
				return nil, d.notADir(cur, seg, subPath, key, create)
			}
			return nil, pathErr("open", subPath, err)
		}
		p.fds = append(p.fds, fd)
		if create && !d.noSync {
			if err := d.ensureDurable(cur, curPath, fd, subPath, created); err != nil {
				p.close()
				return nil, err
			}
		}
		cur, curPath = fd, subPath
	}
	return p, nil
}

// notADir explains why the entry name in dirFD (at path) could not be opened
// as a directory: a link (never followed), or an object in the way of key.
func (d *Driver) notADir(dirFD int, name, path, key string, create bool) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if err == unix.ENOENT && !create {
			return notExist(key)
		}
		return pathErr("stat", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return symlinkError(path)
	case !create:
		return notExist(key) // an object "a" means there is no "a/b"
	case st.Mode&unix.S_IFMT == unix.S_IFREG:
		return conflictError(key, "object "+strconv.Quote(path))
	}
	return conflictError(key, strconv.Quote(path)+", which is neither a directory nor an object")
}

// ensureDurable makes sure the entry of the directory fd (at path, in the
// directory parentFD at parentPath) is durable. A directory this driver just
// created was synced into its parent already; an existing one may have been
// created by another process that has not synced it yet, so its parent is
// synced once per driver and directory inode.
func (d *Driver) ensureDurable(parentFD int, parentPath string, fd int, path string, created bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathErr("stat", path, err)
	}
	ino := uint64(st.Ino)
	if !created {
		if v, ok := d.durable.Load(path); ok && v.(uint64) == ino {
			return nil
		}
		if err := d.syncDir(parentFD, parentPath); err != nil {
			return err
		}
	}
	d.durable.Store(path, ino)
	return nil
}

// removed reports whether the directory fd has been removed (its link count
// is zero), which turns an ENOENT inside it into errRetry.
func removed(fd int) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Nlink == 0
}
