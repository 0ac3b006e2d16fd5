package meta

import (
	"errors"
	"fmt"
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
