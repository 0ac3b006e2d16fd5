//go:build unix

package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

// List implements driver.Driver. The token is the last key of the previous
// page. See the package doc for how the walk keeps byte order, and why it
// never loses an entry that changes under it.
func (d *Driver) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return blob.ListPage{}, err
	}
	if err := d.enter(); err != nil {
		return blob.ListPage{}, err
	}
	defer d.exit()
	return d.list(ctx, opts)
}

// list is List for callers already inside enter/exit.
func (d *Driver) list(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	size := opts.PageSize
	if size <= 0 {
		size = blob.DefaultPageSize
	}
	after := opts.StartAfter
	if opts.Token != "" {
		after = opts.Token
	}
	// Only the directory named by the prefix up to its last "/" can hold
	// keys with the prefix; in it, only names that start with the rest.
	dir, namePrefix := splitKey(opts.Prefix)
	if dir != "" && !validDir(dir) {
		return blob.ListPage{}, nil // no valid key has this prefix
	}
	p, err := d.openDirs(ctx, "", dir, false)
	if err != nil {
		if d.ErrorCode(err) == blob.CodeNotExist || errors.Is(err, unix.ENAMETOOLONG) {
			// Missing, an object in the way, or a name no file system
			// entry can have: nothing has the prefix.
			return blob.ListPage{}, nil
		}
		// A link on the path (an object, listed by its parent, that the
		// driver will not follow) is an error naming it, as it is for
		// Stat: an empty listing would hide whatever the link points to.
		return blob.ListPage{}, err
	}
	defer p.close()
	base := ""
	if dir != "" {
		base = dir + "/"
	}
	l := &lister{ctx: ctx, limit: size + 1, after: after}
	if err := l.walk(p.fd(d), base, namePrefix); err != nil {
		return blob.ListPage{}, err
	}
	var page blob.ListPage
	page.Objects = l.items
	if len(l.items) > size {
		// One more key exists: this page is not the last.
		page.Objects = l.items[:size]
		page.NextToken = page.Objects[size-1].Key
	}
	return page, nil
}

// validDir reports whether the path dir can be a directory below the root
// that is not the driver's own. It is not required to be a valid key: List
// shows the files of directories whose names no key can address (see the
// package doc), so a listing under such a name must find them too.
func validDir(dir string) bool {
	if strings.ContainsRune(dir, 0) {
		return false
	}
	for seg := range strings.SplitSeq(dir, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	first, _, _ := strings.Cut(dir, "/")
	return first != internalName
}

// testHookReadDir, when set, is called after each read of a directory,
// before its entries are looked at, with the key prefix of its entries:
// tests change the directory there to race the walk deterministically.
var testHookReadDir func(base string)

// lister collects up to limit objects with keys greater than after.
type lister struct {
	ctx   context.Context
	limit int
	after string
	items []blob.Attrs
	seen  int // entries stat'ed, for the ctx check
}

type entry struct {
	name string
	sort string // the key of a file; the key plus "/" of a directory
	dir  bool
}

// walk lists the directory dirFD (which stays the caller's), whose keys
// start with base, keeping names that start with namePrefix.
//
// An entry can vanish, or change type, between the read of its directory
// and the stat or open of the entry: a segment sealed by a rename, a
// directory pruned by a Delete. Skipping it would lose an object that may
// only have moved (a rename is atomic: the new name is there as soon as the
// old one is gone), so the walk of that directory starts over from a fresh
// read, after dropping what it had added, and it returns an error naming the
// directory rather than give up silently when the directory never holds
// still for long enough. Files stat'ed on an earlier pass are not stat'ed
// again when their names are still there, so each pass only looks at what
// changed and a busy directory converges.
func (l *lister) walk(dirFD int, base, namePrefix string) error {
	mark := len(l.items)
	known := map[string]blob.Attrs{}
	for pass := 0; ; pass++ {
		if err := l.ctx.Err(); err != nil {
			return err
		}
		l.items = l.items[:mark]
		raced, err := l.walkOnce(dirFD, base, namePrefix, known)
		if err != nil || raced == "" {
			return err
		}
		if pass == maxRetries {
			last := fmt.Sprintf("%q vanished or changed type between the read and its stat", raced)
			if raced == dirChanged {
				last = "the directory changed while it was read"
			}
			return pathErr("list", strings.TrimSuffix(base, "/"), fmt.Errorf(
				"%w: the directory changed under %d re-reads in a row (last: %s)", unix.EAGAIN, pass+1, last))
		}
	}
}

// dirChanged is what walkOnce returns as raced when the directory itself
// changed during a read that was not a snapshot ("/" is in no name).
const dirChanged = "/"

// errDirChanged is readDir's answer when the directory changed while it was
// read and the read may have missed an entry: the walk reads it again.
var errDirChanged = errors.New("local: the directory changed while it was read")

// dirStill returns errDirChanged when the directory dirFD's change or
// modification time moved since before was taken, nil when they did not.
// Timestamps are only as fine as the kernel's clock tick, so a change in
// the same tick as the one before passes: only reads that cannot be one
// call rely on it.
func dirStill(dirFD int, before *unix.Stat_t) error {
	var after unix.Stat_t
	if err := unix.Fstat(dirFD, &after); err != nil {
		return err
	}
	if after.Ctim != before.Ctim || after.Mtim != before.Mtim {
		return errDirChanged
	}
	return nil
}

// walkOnce is one pass of walk over a fresh read of the directory. It
// returns the name of an entry that vanished or changed type since the read,
// or "" when the pass completed.
func (l *lister) walkOnce(dirFD int, base, namePrefix string, known map[string]blob.Attrs) (raced string, err error) {
	dirPath := strings.TrimSuffix(base, "/")
	des, err := readDir(dirFD)
	if err == errDirChanged {
		return dirChanged, nil
	}
	if err == unix.ENOENT && removed(dirFD) {
		// Removed since it was opened (a Delete prunes only empty
		// directories): nothing in it exists any more.
		return "", nil
	}
	if err != nil {
		return "", pathErr("readdir", dirPath, err)
	}
	if testHookReadDir != nil {
		testHookReadDir(base)
	}
	ents := make([]entry, 0, len(des))
	for _, de := range des {
		name := de.name
		// The private directory of the driver is not an object, nor is
		// what is in it. Nothing else is left out: a name that no key can
		// address (invalid UTF-8, a control character, too long) or an
		// entry that is not a regular file is still an object the store
		// holds, and hiding it would hide its loss (see the package doc).
		if !strings.HasPrefix(name, namePrefix) || base == "" && name == internalName {
			continue
		}
		e := entry{name: name, sort: base + name}
		dir := de.kind == kindDir
		if de.kind == kindUnknown {
			// The file system did not say (DT_UNKNOWN): ask it.
			var st unix.Stat_t
			switch err := unix.Fstatat(dirFD, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
			case err == unix.ENOENT:
				return name, nil
			case err != nil:
				return "", pathErr("stat", e.sort, err)
			}
			dir = st.Mode&unix.S_IFMT == unix.S_IFDIR
			if !dir {
				known[name] = attrsOf(e.sort, &st)
			}
		}
		if dir {
			e.dir = true
			e.sort += "/"
		}
		ents = append(ents, e)
	}
	// Sorting names with "/" appended to directories puts each directory's
	// keys, which all start with that string, exactly where byte order wants
	// them among its siblings: names hold no "/", so the first byte where a
	// sibling differs decides for the whole subtree.
	slices.SortFunc(ents, func(a, b entry) int { return strings.Compare(a.sort, b.sort) })
	// Skip what is at or before after: a file whose key is not greater, or a
	// directory whose keys are all smaller (after is beyond it without being
	// inside it). The first entry to keep is the directory that after is in,
	// if any, or the first entry greater than after.
	i := sort.Search(len(ents), func(i int) bool {
		e := ents[i]
		return e.sort > l.after || e.dir && strings.HasPrefix(l.after, e.sort)
	})
	for _, e := range ents[i:] {
		if len(l.items) >= l.limit {
			return "", nil
		}
		if e.dir {
			sub, err := openDirAt(dirFD, e.name)
			switch err {
			case nil:
			case unix.ENOENT, unix.ENOTDIR, unix.ELOOP, unix.EMLINK:
				// Removed, renamed, or replaced by a file or a link since
				// the read.
				return e.name, nil
			default:
				return "", pathErr("open", strings.TrimSuffix(e.sort, "/"), err)
			}
			err = l.walk(sub, e.sort, "")
			unix.Close(sub)
			if err != nil {
				return "", err
			}
			continue
		}
		if a, ok := known[e.name]; ok {
			l.items = append(l.items, a)
			continue
		}
		if l.seen++; l.seen%256 == 0 {
			if err := l.ctx.Err(); err != nil {
				return "", err
			}
		}
		var st unix.Stat_t
		switch err := unix.Fstatat(dirFD, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); {
		case err == unix.ENOENT:
			return e.name, nil
		case err != nil:
			return "", pathErr("stat", e.sort, err)
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return e.name, nil // a file replaced by a directory since the read
		}
		// A regular file, or a link or a special file, described as it is
		// (lstat): listed, never followed.
		a := attrsOf(e.sort, &st)
		known[e.name] = a
		l.items = append(l.items, a)
	}
	return "", nil
}

// dirent is one entry of a directory, as its read tells it.
type dirent struct {
	name string
	kind entryKind
}

type entryKind uint8

const (
	kindUnknown entryKind = iota // the file system did not say: stat it
	kindDir
	kindOther // anything but a directory
)
