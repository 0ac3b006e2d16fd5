package segment

import "github.com/redokit/redokit/internal/layout"

// SeqPrefix returns the key prefix that every segment of one writer epoch's
// seq begins with, sealed or active: "<log>/seg/<writer>/<epoch>-<seq>",
// both numbers at their full width. Listing it finds exactly the names of
// that seq (the next character is '-' for a sealed name and '.' for an
// active one); SeqPrefix + "-*" + SealedExt is the pattern of the sealed
// name, whose ts range only the segment knows.
func SeqPrefix(logID, writer string, epoch, seq uint64) string {
	b := make([]byte, 0, 2*numWidth+1)
	b = appendPadded(b, epoch)
	b = append(b, '-')
	b = appendPadded(b, seq)
	return layout.WriterSegments(logID, writer) + string(b)
}
