package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
)

// ErrStale reports a metadata object older than one another durable object
// (or this process) proves was already seen: a restored object version, a
// stale read from a lagging replica or cache. Such an object is never used,
// and never "repaired" by writing its content back. Every *StaleError
// matches it.
var ErrStale = errors.New("meta: stale metadata object")

// ErrSpanTooLate: a span registered below the global resolved ts would let
// the log claim (start, resolved] complete for events it does not hold.
var ErrSpanTooLate = errors.New("meta: span registered below the global resolved ts")

// StaleError names the object read (Key, at generation Got) and the object
// that proves a newer one was seen (Witness, which saw Want).
type StaleError struct {
	Key     string
	Got     uint64
	Witness string
	Want    uint64
	Detail  string // what the witness saw, in words
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("meta: %s is stale: it is at generation %d, but %s proves generation %d was seen (%s): %v",
		e.Key, e.Got, e.Witness, e.Want, e.Detail, ErrStale)
}

// Is makes the error match ErrStale.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// ErrInconsistent reports metadata objects that contradict each other in a
// way no generation orders: a span a writer publishes that the meta object
// neither registers nor removed. Every *InconsistentError matches it.
var ErrInconsistent = errors.New("meta: metadata objects contradict each other")

// InconsistentError names the two objects that disagree.
type InconsistentError struct {
	Key, Witness string
	Detail       string
}

func (e *InconsistentError) Error() string {
	return fmt.Sprintf("meta: %s contradicts %s: %s: %v", e.Key, e.Witness, e.Detail, ErrInconsistent)
}

// Is makes the error match ErrInconsistent.
func (e *InconsistentError) Is(target error) bool { return target == ErrInconsistent }

// stateRereads bounds how many times CheckStates reads again a writer state
// older than the meta object accounted before it calls the state stale; it
// waits the package's back-off before each (about 10, 20 and 40 ms), since
// a replica catches up in time, not in reads.
const stateRereads = 3

// LoadMeta reads a log's meta object with one request: for readers, which
// never write it back and need no ETag (ReadMeta pairs one).
func LoadMeta(ctx context.Context, b *blob.Bucket, logID string) (*Meta, error) {
	m, _, err := readMeta(ctx, b, logID, false)
	return m, err
}

// CheckStates holds writer states, read after the meta object m, against
// it (see Freshness in the package doc): a state older than the generation
// m accounted for its writer is stale, since states only grow and m was
// read first; m older than a generation of it a state saw, or missing a
// span a state publishes, is settled by reading the meta object again (the
// writer may have read a newer one after m was read), and is an error
// naming both objects when the fresh one is behind too. A state behind m
// is read again, up to stateRereads times with a back-off before each,
// since a lagging replica or cache serves old copies for a while and then
// the current one; a copy read again that is current replaces the stale
// one in states, and one still behind (a restored version) is the error.
// Readers and verify call it before they trust what the states publish.
func CheckStates(ctx context.Context, b *blob.Bucket, logID string, m *Meta, states map[string]*WriterState) error {
	err := crossCheck(logID, m, states)
	var sb *statesBehind
	for reread := 0; reread < stateRereads && errors.As(err, &sb); reread++ {
		if werr := backoff(ctx, reread+1); werr != nil {
			return fmt.Errorf("meta: read %s again to settle %w: %w", layout.WriterState(logID, sb.writer), sb.err, werr)
		}
		st, _, rerr := readWriterState(ctx, b, logID, sb.writer, false)
		if rerr != nil {
			return fmt.Errorf("meta: read %s again to settle %w: %w", layout.WriterState(logID, sb.writer), sb.err, rerr)
		}
		states[sb.writer] = st
		err = crossCheck(logID, m, states)
	}
	var mb *metaBehind
	switch {
	case errors.As(err, &sb):
		return sb.err
	case !errors.As(err, &mb):
		return err
	}
	fresh, err := LoadMeta(ctx, b, logID)
	if err != nil {
		return fmt.Errorf("meta: read %s again to settle %w: %w", layout.Meta(logID), mb.err, err)
	}
	if fresh.Generation < m.Generation {
		return &StaleError{Key: layout.Meta(logID), Got: fresh.Generation, Witness: "an earlier read of it", Want: m.Generation,
			Detail: "the object read again is older than the one read first"}
	}
	err = crossCheck(logID, fresh, states)
	switch {
	case errors.As(err, &mb):
		return mb.err
	case errors.As(err, &sb):
		// The fresh object accounted states newer than those read: a
		// coordinator ticked in between. The states were checked against
		// the first read, which is what they are used with.
		return nil
	}
	return err
}
