package driver

import (
	"fmt"
	"strings"
)

// DeleteError is what a driver's batch Delete returns when some keys could
// not be removed. It names them (the first few in its message) and unwraps to
// each key's error, so errors.Is and errors.As see them.
type DeleteError struct {
	Total  int        // keys in the batch
	Failed []KeyError // sorted by key
	Store  string     // the backend, for the message ("gcs", "azure")
}

// KeyError is one key a batch Delete failed to remove.
type KeyError struct {
	Key string
	Err error
}

func (e *DeleteError) Error() string {
	const show = 5
	var b strings.Builder
	if e.Store != "" {
		b.WriteString(e.Store + ": ")
	}
	fmt.Fprintf(&b, "%d of %d keys not deleted:", len(e.Failed), e.Total)
	for i, f := range e.Failed {
		if i == show {
			fmt.Fprintf(&b, " … and %d more", len(e.Failed)-show)
			break
		}
		fmt.Fprintf(&b, " %q (%v);", f.Key, f.Err)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Unwrap returns every key's error.
func (e *DeleteError) Unwrap() []error {
	errs := make([]error, len(e.Failed))
	for i, f := range e.Failed {
		errs[i] = f.Err
	}
	return errs
}
