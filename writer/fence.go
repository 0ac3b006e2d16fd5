package writer

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/meta"
)

// Fence takes writerID's next epoch without writing under it, so that a
// process still holding an earlier epoch (a zombie after a failover) can
// publish nothing more. Like Open, it first finds what the epoch it replaces
// made durable beyond its publication (its progress frames) and fences
// there: a flush that epoch reported and had not published yet stays in the
// log. logger (nil: none) is told of what the walk found.
func Fence(ctx context.Context, b *blob.Bucket, logID, writerID string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	appendable := b.CanAppend()
	_, err := meta.AcquireWriter(ctx, b, logID, writerID, &meta.AcquireOptions{
		Durable: func(ctx context.Context, prev *meta.WriterState) (*meta.Progress, error) {
			return durableProgress(ctx, b, prev, appendable, logger)
		}})
	if err != nil {
		// AcquireWriter's errors name the writer's state object (or the
		// ID that is invalid): saying the log and writer again only
		// repeats them.
		return fmt.Errorf("writer: fence: %w", err)
	}
	return nil
}
