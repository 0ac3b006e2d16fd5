package reader

import (
	"context"
	"iter"

	"github.com/redokit/redokit/codec"
)

// CodecEvents iterates over the remaining events as Events does, yielding
// each one's codec.Event: the shape a consumer that does not care where an
// event came from takes, such as apply.Run's Source, so that
//
//	apply.Run(ctx, r.CodecEvents(ctx), sink, nil)
//
// needs no adapter. Each event is valid until the next iteration. An error
// ends the iteration: it is yielded with a nil event; io.EOF is not yielded.
func (r *Reader) CodecEvents(ctx context.Context) iter.Seq2[*codec.Event, error] {
	return func(yield func(*codec.Event, error) bool) {
		for ev, err := range r.Events(ctx) {
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(&ev.Event, nil) {
				return
			}
		}
	}
}
