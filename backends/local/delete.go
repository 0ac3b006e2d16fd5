//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

// Delete implements driver.Driver. A missing key, or one whose path is in the
// way of nothing but directories, is not an error. Keys that fail do not stop
// the others; the error names each of them.
func (d *Driver) Delete(ctx context.Context, keys []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.enter(); err != nil {
		return err
	}
	defer d.exit()
	var errs []error
	fail := func(key string, err error) { errs = append(errs, fmt.Errorf("delete %q: %w", key, err)) }
	// Consecutive keys of one directory (the usual case: GC deletes sorted
	// segment names) share one open path, one directory fsync and one prune.
	var cur *pending
	flush := func() {
		if cur != nil {
			if err := d.finish(cur); err != nil {
				fail(cur.lastKey, err)
			}
			cur = nil
		}
	}
	defer flush()
	for _, key := range keys {
		if err := ctx.Err(); err != nil {
			flush()
			return errors.Join(append(errs, err)...)
		}
		if err := checkKey(key); err != nil {
			fail(key, err)
			continue
		}
		dir, name := splitKey(key)
		if cur != nil && cur.p.path != dir {
			flush()
		}
		if cur == nil {
			p, err := d.openDirs(ctx, key, dir, false)
			if err != nil {
				if d.ErrorCode(err) != blob.CodeNotExist {
					fail(key, err)
				}
				continue
			}
			cur = &pending{p: p}
		}
		removed, err := d.unlink(ctx, key, cur.p.fd(d), name)
		if err != nil {
			fail(key, err)
			continue
		}
		if removed {
			cur.changed, cur.lastKey = true, key
		}
	}
	flush()
	return errors.Join(errs...)
}

// pending is a directory Delete has removed entries from.
type pending struct {
	p       *dirs
	changed bool
	lastKey string
}

// unlink removes name (the object key) from the directory dirFD under the
// key's stripe lock, and reports whether there was an object to remove.
func (d *Driver) unlink(ctx context.Context, key string, dirFD int, name string) (bool, error) {
	unlock, err := d.lock(ctx, key)
	if err != nil {
		return false, err
	}
	defer unlock()
	err = ignoringEINTR(func() error { return unix.Unlinkat(dirFD, name, 0) })
	switch err {
	case nil:
		return true, d.trace("unlink", key)
	case unix.ENOENT:
		return false, nil
	}
	// EISDIR on Linux, EPERM elsewhere: a directory of keys is no object.
	var st unix.Stat_t
	if unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return false, nil
	}
	return false, pathErr("unlink", key, err)
}

// finish syncs a directory Delete changed, so that the deletions are durable,
// then removes it and its ancestors while they are empty (never the root).
// The removal is best effort and not synced: an empty directory that comes
// back after a crash holds no key.
func (d *Driver) finish(c *pending) error {
	defer c.p.close()
	if !c.changed {
		return nil
	}
	err := d.syncDir(c.p.fd(d), c.p.path)
	if c.p.path == "" {
		return err
	}
	segs := strings.Split(c.p.path, "/")
	for i := len(c.p.fds) - 1; i >= 0; i-- {
		parent := d.rootFD
		if i > 0 {
			parent = c.p.fds[i-1]
		}
		if unix.Unlinkat(parent, segs[i], unix.AT_REMOVEDIR) != nil {
			break // not empty (or gone): its ancestors are not empty either
		}
	}
	return err
}
