//go:build unix

package local

import (
	"context"
	"os"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/redokit/redokit/blob"
)

// List implements blob.Driver. The token is the last key of the previous
// page. See the package doc for how the walk keeps byte order.
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
		if d.ErrorCode(err) == blob.CodeNotExist || d.ErrorCode(err) == blob.CodeInvalidArgument {
			// Missing, an object in the way, or a link: nothing to list.
			return blob.ListPage{}, nil
		}
		return blob.ListPage{}, err
	}
	defer p.close()
	// A fresh open file description: the directory offset that reading
	// moves must not be shared with concurrent listings.
	fd, err := openDirAt(p.fd(d), ".")
	if err != nil {
		return blob.ListPage{}, pathErr("open", dir, err)
	}
	base := ""
	if dir != "" {
		base = dir + "/"
	}
	l := &lister{ctx: ctx, limit: size + 1, after: after}
	if err := l.walk(fd, base, namePrefix); err != nil {
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

// validDir reports whether the key path dir can be a directory of keys.
func validDir(dir string) bool {
	return blob.ValidateKey(dir) == nil && !strings.HasPrefix(dir+"/", internalName+"/")
}

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

// walk lists the directory fd (which it owns and closes), whose keys start
// with base, keeping names that start with namePrefix.
func (l *lister) walk(fd int, base, namePrefix string) error {
	if err := l.ctx.Err(); err != nil {
		unix.Close(fd)
		return err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return pathErr("readdir", strings.TrimSuffix(base, "/"), err)
	}
	ents := make([]entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if !strings.HasPrefix(name, namePrefix) || !validName(name) || base == "" && name == internalName {
			continue
		}
		e := entry{name: name, sort: base + name}
		switch t := de.Type(); {
		case t.IsDir():
			e.dir = true
			e.sort += "/"
		case !t.IsRegular():
			continue // links and special files are not objects
		}
		if len(e.sort) > blob.MaxKeyLen {
			continue // no valid key can live there
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
	dfd := int(f.Fd())
	for _, e := range ents[i:] {
		if len(l.items) >= l.limit {
			return nil
		}
		if e.dir {
			sub, err := openDirAt(dfd, e.name)
			if err != nil {
				continue // removed, or replaced by a file or a link, since readdir
			}
			if err := l.walk(sub, e.sort, ""); err != nil {
				return err
			}
			continue
		}
		if l.seen++; l.seen%256 == 0 {
			if err := l.ctx.Err(); err != nil {
				return err
			}
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue // removed, or replaced, since readdir
		}
		l.items = append(l.items, attrsOf(e.sort, &st))
	}
	return nil
}

// validName reports whether a directory entry can be a key segment: valid
// UTF-8 without control characters (see blob.ValidateKey). Other names are
// not listed, since no key could address them.
func validName(name string) bool {
	if !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
