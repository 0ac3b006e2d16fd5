package conformance

import (
	"fmt"
	"time"

	"github.com/redokit/redokit/blob"
)

// ModTimeTolerance is how far an object's ModTime may lie outside the time
// its Put ran, by the suite's clock: the store's clock may be that far off
// the client's, and a store that keeps whole seconds truncates.
const ModTimeTolerance = time.Minute

// modTime: an object's ModTime, as Put returns it, as Stat reports it, and
// as a listing shows it, is the time of its last write, within
// ModTimeTolerance. gc --grace keeps segments modified within the grace by
// the ModTime a listing shows: a zero one, or one hours off (a local time
// read as UTC), makes GC take a new segment for an old one.
func (s *suite) modTime(t T) {
	e := s.bucket(t)
	ctx := t.Context()
	type window struct{ from, to time.Time }
	keys := []string{"mtime/a", "mtime/b", "mtime/c"}
	when := map[string]window{}
	for _, k := range keys {
		from := time.Now()
		a := put(t, e.b, k, []byte(k))
		w := window{from, time.Now()}
		when[k] = w
		checkModTime(t, fmt.Sprintf("Put(%q) returned", k), a.ModTime, w.from, w.to)
		st, err := e.b.Stat(ctx, k)
		if err != nil {
			t.Fatalf("Stat(%q): %v", k, err)
		}
		checkModTime(t, fmt.Sprintf("Stat(%q)", k), st.ModTime, w.from, w.to)
	}
	// An overwrite is a write: its ModTime is its own.
	from := time.Now()
	put(t, e.b, keys[0], []byte("overwritten"))
	when[keys[0]] = window{from, time.Now()}
	s.settle(t, e.b, "mtime/", keys, "before listing ModTimes")
	listed := 0
	for a, err := range e.b.List(ctx, "mtime/") {
		if err != nil {
			t.Fatalf("List(%q): %v", "mtime/", err)
		}
		w, ok := when[a.Key]
		if !ok {
			continue // settle reported it
		}
		listed++
		checkModTime(t, fmt.Sprintf("List(%q) shows %q with", "mtime/", a.Key), a.ModTime, w.from, w.to)
	}
	if listed != len(keys) {
		t.Errorf("List(%q) showed %d of the %d keys", "mtime/", listed, len(keys))
	}
	// The same through ListPage in pages of one: the per-page path.
	page, err := e.b.ListPage(ctx, "mtime/", blob.ListOptions{PageSize: 1})
	if err != nil {
		t.Fatalf("ListPage(%q, size 1): %v", "mtime/", err)
	}
	for _, a := range page.Objects {
		if w, ok := when[a.Key]; ok {
			checkModTime(t, fmt.Sprintf("ListPage(%q, size 1) shows %q with", "mtime/", a.Key), a.ModTime, w.from, w.to)
		}
	}
}

// checkModTime fails t unless mt is within ModTimeTolerance of [from, to].
func checkModTime(t T, what string, mt, from, to time.Time) {
	t.Helper()
	const why = "gc --grace keeps segments by the ModTime a listing shows"
	switch {
	case mt.IsZero():
		t.Errorf("%s no ModTime: %s, and a zero one is older than any grace", what, why)
	case mt.Before(from.Add(-ModTimeTolerance)) || mt.After(to.Add(ModTimeTolerance)):
		t.Errorf("%s ModTime %v, but the write ran from %v to %v (tolerance %v; %s)", what, mt.UTC().Format(time.RFC3339Nano),
			from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano), ModTimeTolerance, why)
	}
}
