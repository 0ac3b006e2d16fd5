package driver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// NewDeleteError returns the DeleteError of a Delete of total keys in which
// failed were not removed (it sorts them by key); store names the backend in
// the message.
func NewDeleteError(store string, total int, failed []KeyError) *DeleteError {
	slices.SortFunc(failed, func(a, b KeyError) int { return strings.Compare(a.Key, b.Key) })
	return &DeleteError{Total: total, Failed: failed, Store: store}
}

// DeleteEach deletes keys one request each, at most concurrency at once, for
// a store without a batch delete (or a driver told not to use it), and
// returns the keys del failed on, in no order. del must return nil for a key
// that is already missing, as Delete must. Once ctx ends no more keys are
// started, so a caller with no failures returns ctx.Err(): an interrupted
// Delete must not look complete.
func DeleteEach(ctx context.Context, keys []string, concurrency int, del func(ctx context.Context, key string) error) []KeyError {
	var (
		mu     sync.Mutex
		failed []KeyError
		wg     sync.WaitGroup
		sem    = make(chan struct{}, max(concurrency, 1))
	)
	for _, k := range keys {
		sem <- struct{}{}
		// After the wait for a slot, which may have outlasted ctx.
		if ctx.Err() != nil {
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := del(ctx, k); err != nil {
				mu.Lock()
				failed = append(failed, KeyError{Key: k, Err: err})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}
