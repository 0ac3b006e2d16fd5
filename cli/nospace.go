package cli

import "github.com/redokit/redokit/gc"

// fullHint is what to add to the error of a write that failed because the
// store is full: the commands that need no new object, and where the
// procedure is. Empty for any other error.
func fullHint(err error) string {
	if !gc.NoSpace(err) {
		return ""
	}
	return "; the store is full: 'redokit gc --yes' deletes what is safe and writes nothing, and 'redokit rm' removes a whole log deleting first; anything else needs room for a small object (see OPERATIONS.md, \"Storage full\")"
}
