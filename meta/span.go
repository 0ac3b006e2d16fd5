package meta

import "errors"

// ErrFenced reports that a writer's epoch is no longer current: another
// process has taken over its writer ID (a newer epoch is in its state), and
// this one must stop writing. It is a redo concept, so it lives here and not
// in the storage layer; the only way to it is a re-read that shows the newer
// epoch (see FencedError).
var ErrFenced = errors.New("meta: writer fenced by a newer epoch")

// SpanID identifies a span: a table, or a key range of a split table. The
// caller chooses it (a table ID, or any number it assigns to a key range);
// the writers, the coordinator and the sink gate all name spans by it.
type SpanID uint64
