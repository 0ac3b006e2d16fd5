package meta

// SpanID identifies a span: a table, or a key range of a split table. The
// caller chooses it (a table ID, or any number it assigns to a key range);
// the writers, the coordinator and the sink gate all name spans by it.
type SpanID uint64
