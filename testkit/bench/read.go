package bench

import (
	"context"
	"io"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/reader"
)

// ReadAll reads the log (0, maxTs] with reader.Open and NextBatch and counts
// its events.
func ReadAll(ctx context.Context, b *blob.Bucket, logID string, maxTs uint64, raw bool) (rows, ddls int64, err error) {
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: 0, EndTs: maxTs, Raw: raw})
	if err != nil {
		return 0, 0, err
	}
	defer r.Close()
	for {
		evs, err := r.NextBatch(ctx, 1024)
		if err == io.EOF {
			return rows, ddls, nil
		}
		if err != nil {
			return rows, ddls, err
		}
		for _, ev := range evs {
			if ev.Kind == codec.RowEvent {
				rows++
			} else {
				ddls++
			}
		}
	}
}
