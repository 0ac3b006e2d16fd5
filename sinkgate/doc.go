// Package sinkgate is what a CDC sink wraps around its downstream writes so
// that the downstream never holds what the redo log does not: the rule of
// "eventually consistent replication".
//
// # The rule
//
// A sink may write an event downstream only once the log's global resolved ts
// G (the redo watermark that meta.Coordinator computes and persists in the
// log's meta object) is at or above the event's commit ts. Then every event at
// or below the commit ts, of every span of every writer, is durable in the
// log, and a recovery that replays (checkpoint, G] after a disaster brings the
// downstream to a consistent state. A downstream that ran ahead of G would
// hold rows the log cannot replay, and a recovery would leave it torn.
//
// # What a Gate does
//
// A Gate sits between the CDC system and its downstream, in front of one redo
// writer:
//
//   - Write encodes a batch of one span's events once, hands those bytes to
//     the redo writer first (writer.WriteEncoded), then holds the same bytes
//     in the span's queue (so what is released is exactly what was logged);
//   - AdvanceResolved passes the span's resolved ts to the writer, and
//     remembers it: it is how the gate knows that a span has nothing more to
//     come below a ts;
//   - Run, the release loop, waits for G to move (Resolved, normally a
//     *meta.Watcher reading the persisted meta object), and hands the
//     downstream every held event at or below G, in commit-ts order across the
//     gate's spans — at one commit ts rows before DDLs, then in arrival order —
//     in batches of whole commit ts;
//   - after each release it reports the downstream's applied ts as the
//     checkpoint (Checkpointer: meta.Coordinator.SetCheckpoint, or a callback
//     when the coordinator lives in another process, or a [Checkpoints]
//     member when several gates share one log).
//
// The events a gate releases are all at or below G, whoever wrote them: a
// span that moved here behind the watermark (failover restarts it at the
// log's checkpoint) replays events that G already covers, because its dead
// owner made them durable; they are released as soon as they arrive, after
// the events already released, so each span's own order holds though the
// order across spans cannot.
//
// # The applied ts (checkpoint)
//
// For each span the gate keeps the highest ts at or below which the
// downstream holds every event of the span: after a release at G it is G when
// the span's queue holds nothing at or below G and the span's resolved ts is
// at least G; otherwise the resolved ts, or the ts just below the oldest event
// still held. The gate's applied ts is the minimum over its spans (removed
// spans count until their queue drains), or G when it has none. It is at most
// G, so the coordinator never refuses it as ahead (meta.ErrCheckpointAhead),
// and it falls when a span joins behind it: AddSpan reports the lower value at
// once, so that a [Checkpoints] aggregate never runs ahead of a span that is
// still catching up.
//
// # Memory and back-pressure
//
// Held events take at most Options.MaxHeldBytes of encoded bytes; a Write that
// would pass it blocks until a release frees room or its ctx ends (a batch
// larger than the limit is admitted alone). Only events at or below G can be
// released, and G only passes what the writers flushed, which is at most
// what the spans resolved: the limit must hold what arrives between
// resolved-ts advances, like the writer's own memory quota.
//
// # Shutdown and failures
//
// Close stops new writes, closes the redo writer (flushing what is resolved),
// waits until G covers the writer's final flushed ts, releases what that
// covers and drops the rest (events above the flushed ts are not in the log:
// the span's next owner writes them again). A downstream that fails makes
// Run return its error with the failed batch still held: Run again retries
// it, so Downstream.Apply must be idempotent (a CDC sink in safe mode is;
// ApplyTo is the bridge to an apply sink in that mode). Failures to read G or
// to report the checkpoint are retried, not fatal. Close is idempotent: a
// second call returns the first one's result.
package sinkgate
