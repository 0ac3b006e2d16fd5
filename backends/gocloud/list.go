package gocloud

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strings"

	gcblob "gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/redokit/redokit/blob"
)

// List implements driver.Driver over gocloud's flat listing (an empty
// Delimiter: gocloud then returns every key under the prefix, no
// pseudo-directories).
//
// gocloud has no start-after, so StartAfter is done by skipping the keys at or
// below it: the skipped keys are still fetched, a cost proportional to their
// number. Every page also drops keys at or below the last key it returned, so
// the output is strictly increasing even if a store repeats a key across a
// page boundary.
//
// The continuation token carries that last key and gocloud's own page token.
// On an unordered store (Options.UnorderedList) it carries only the last key,
// and each page lists the whole prefix and sorts it.
func (d *Driver) List(ctx context.Context, opts blob.ListOptions) (blob.ListPage, error) {
	if err := d.check(ctx); err != nil {
		return blob.ListPage{}, err
	}
	size := opts.PageSize
	if size <= 0 || size > blob.DefaultPageSize {
		size = blob.DefaultPageSize
	}
	after, gctok := opts.StartAfter, gcblob.FirstPageToken
	if opts.Token != "" {
		var err error
		if after, gctok, err = decodeToken(opts.Token); err != nil {
			return blob.ListPage{}, err
		}
	}
	if d.unordered {
		return d.listSorted(ctx, opts.Prefix, after, size)
	}
	if len(gctok) == 0 {
		// A token of ours for an ordered listing always carries gocloud's.
		return blob.ListPage{}, errBadToken
	}
	var page blob.ListPage
	for {
		objs, next, err := d.listPage(ctx, gctok, size, &gcblob.ListOptions{Prefix: opts.Prefix})
		if err != nil {
			return blob.ListPage{}, err
		}
		for _, o := range objs {
			if o.IsDir || o.Key <= after {
				continue
			}
			page.Objects = append(page.Objects, listAttrs(o))
			after = o.Key
		}
		if len(next) == 0 {
			return page, nil
		}
		gctok = next
		if len(page.Objects) > 0 {
			page.NextToken = encodeToken(after, gctok)
			return page, nil
		}
		// Everything on this gocloud page was at or below StartAfter:
		// fetch the next rather than hand back an empty page.
	}
}

// listSorted lists a store whose listing is not in byte order. Reading the
// whole prefix per page is O(keys) a page; it is the price of a correct order
// on such a store.
func (d *Driver) listSorted(ctx context.Context, prefix, after string, size int) (blob.ListPage, error) {
	var all []blob.Attrs
	for attempt := 0; ; attempt++ {
		var err error
		all, err = d.listAll(ctx, prefix, after)
		if !retryList(ctx, err, attempt) {
			if err != nil {
				return blob.ListPage{}, err
			}
			break
		}
	}
	slices.SortFunc(all, func(a, b blob.Attrs) int { return strings.Compare(a.Key, b.Key) })
	// A store that lists a key twice must not make us return it twice.
	all = slices.CompactFunc(all, func(a, b blob.Attrs) bool { return a.Key == b.Key })
	var page blob.ListPage
	if len(all) > size {
		page.Objects = all[:size:size]
		page.NextToken = encodeToken(all[size-1].Key, nil)
	} else {
		page.Objects = all
	}
	return page, nil
}

// listAll lists every key under prefix greater than after, unsorted.
func (d *Driver) listAll(ctx context.Context, prefix, after string) ([]blob.Attrs, error) {
	var all []blob.Attrs
	it := d.b.List(&gcblob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return all, nil
		}
		if err != nil {
			return nil, err
		}
		if o.IsDir || o.Key <= after {
			continue
		}
		all = append(all, listAttrs(o))
	}
}

// listRetries bounds the re-lists of a page that failed with not-found. A
// file-system store (fileblob) reads a directory, then stats each entry, and
// fails when an entry was deleted in between: the page is listed again, whole,
// from the same token, so nothing is skipped; a not-found that persists is
// returned.
const listRetries = 16

// retryList reports whether a listing that failed with err, on its attempt
// (from 0), is worth listing again.
func retryList(ctx context.Context, err error, attempt int) bool {
	return err != nil && gcerrors.Code(err) == gcerrors.NotFound && attempt < listRetries && ctx.Err() == nil
}

// listPage is gocloud's ListPage, listed again after a not-found (retryList).
func (d *Driver) listPage(ctx context.Context, tok []byte, size int, opts *gcblob.ListOptions) ([]*gcblob.ListObject, []byte, error) {
	for attempt := 0; ; attempt++ {
		objs, next, err := d.b.ListPage(ctx, tok, size, opts)
		if !retryList(ctx, err, attempt) {
			return objs, next, err
		}
	}
}

// listAttrs converts a gocloud list entry. gocloud's ListObject carries no
// ETag, so listed Attrs have none; Stat has it.
func listAttrs(o *gcblob.ListObject) blob.Attrs {
	return blob.Attrs{Key: o.Key, Size: o.Size, ModTime: o.ModTime}
}

// Token format: base64url(after) "." base64url(gocloud token). Both parts are
// raw (unpadded) base64url, whose alphabet has no ".".
var (
	b64         = base64.RawURLEncoding
	errBadToken = fmt.Errorf("%w: malformed list token", blob.ErrInvalidArgument)
)

func encodeToken(after string, gctok []byte) string {
	return b64.EncodeToString([]byte(after)) + "." + b64.EncodeToString(gctok)
}

func decodeToken(tok string) (after string, gctok []byte, err error) {
	a, g, ok := strings.Cut(tok, ".")
	if !ok {
		return "", nil, errBadToken
	}
	ab, err1 := b64.DecodeString(a)
	gb, err2 := b64.DecodeString(g)
	if err1 != nil || err2 != nil || len(ab) == 0 {
		return "", nil, errBadToken
	}
	return string(ab), gb, nil
}
