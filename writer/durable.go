package writer

import (
	"context"
	"log/slog"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/chain"
	"github.com/redokit/redokit/meta"
)

// durableProgress finds what the epoch of prev made durable after its last
// publication (chain.Durable: the newest progress frame its chain covers,
// walked up from the published seq), for the next epoch's fence. A flush is
// reported once its frame is durable, before the state object says so; the
// fence taken from this keeps every reported flush in the log.
func durableProgress(ctx context.Context, b *blob.Bucket, prev *meta.WriterState, appendable bool, log *slog.Logger) (*meta.Progress, error) {
	return chain.Durable(ctx, b, prev, appendable, log)
}
