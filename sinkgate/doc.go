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
//     in batches of whole commit ts, reading back from the log, in their
//     places, the events it evicted to stay within its memory (Eviction);
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
// still held or owned by the log (see Eviction). The gate's applied ts is the minimum over its spans (removed
// spans count until their queue drains), or G when it has none. It is at most
// G, so the coordinator never refuses it as ahead (meta.ErrCheckpointAhead),
// and it falls when a span joins behind it: AddSpan reports the lower value at
// once, so that a [Checkpoints] aggregate never runs ahead of a span that is
// still catching up.
//
// # Memory and back-pressure
//
// Held events take at most Options.MaxHeldBytes of encoded bytes. Only
// events at or below G can be released, and G cannot pass a span's resolved
// ts, which the span's caller moves only after its Writes return: a
// transaction larger than the limit, or a stalled span's next transaction in
// a gate that other spans filled, can never be released by waiting. So a
// Write that would pass the limit never waits on the resolved ts:
//
//   - with Options.Log (the log the writer writes; *redokit.Log), it evicts
//     (see Eviction) until it fits, or until nothing above the released ts is
//     left to evict;
//   - it then waits only while a release that needs nothing of its caller
//     can make room: events at or below the G the gate acted on, which the
//     downstream is being given, or (without a log) events at or below the
//     writing span's resolved ts, which G can reach without it;
//   - without a log, a Write no such release can make room for returns a
//     *NoRoomError (errors.Is ErrNoRoom) naming the span, the Write's bytes
//     and what the gate holds, instead of blocking forever.
//
// A batch larger than the limit goes to the log with a log; without one it
// is admitted alone. Memory is therefore MaxHeldBytes of held encodings
// (which include the batch being read back, see below), plus the decoded
// batch being applied, plus a read-back's reader: open segment streams ×
// three decoded blocks (reader.Options Prefetch 1, no lookahead). It never
// grows with a transaction, a stall or the input.
//
// # Eviction
//
// When a Write finds the gate full, the gate picks the span holding the most
// bytes above the released ts (the Write's own events counting as its span's)
// and hands the log the whole commit-ts range of those events: every held
// event in that range, of every span, is freed, and so is every later event
// a Write brings into the range: the writer already wrote them (the log is
// the gate's spill, as TiCDC's redo event cache spills to its redo log). The
// gate keeps, per range (a window), its bounds and the number of its events,
// and per span the range of its events the log owns and its tables. Ranges
// that are not wholly released merge into one, so there are few.
//
// A range goes whole, never a span's part of it, because at one commit ts
// only the log knows where an evicted event stood among the others: the
// writer took them, as the gate did, rows before DDLs, then in arrival order,
// and the reader returns one writer epoch's events at one commit ts in that
// order. So the release reads each range back where its events belong: it
// applies the held events below it, then reads (lo-1, end] with a reader
// (package reader, KeepDuplicates, filtered to the gate's tables), keeps the
// events of this writer epoch and of the gate's spans' tables (a removed
// span's only up to its resolved ts), applies them in the reader's order, and
// goes on above it. The downstream sees what it would have seen with
// unlimited memory: the same events, once each, in the same order. (Arrival
// order between two Writes that run at once is either order; the writer and
// the gate may pick differently, and with eviction the writer's pick is
// delivered.)
//
// A read-back proves its range complete as every read does: reader.Open
// refuses a range the log cannot prove (reader.ErrUnproven, ErrIncomplete,
// a corrupt segment, ...); such a failure, or the downstream's, makes Run
// return it, with what was not applied still owned by the log, and Run again
// resumes after the last event applied. Nothing is skipped: a range whose
// events in the log do not number what the gate gave it fails every release
// after it (it is loose, and not counted, only when a span was removed with
// events above its resolved ts there, which the writer may or may not have
// stored). It reads only what the writer flushed: a span added behind the
// writer's flushed ts (catch-up) has events there the log does not hold yet,
// so the first read-back after such a span joined flushes the writer, and a
// read-back stops at what the writer flushed and resumes when it moves (the
// release stops there too: nothing later goes first).
//
// A read-back batch ends at a commit-ts boundary once it holds MaxBatch
// events; its events count in the held bytes, and when the next one does not
// fit the batch is applied as it is, even inside a commit ts: a transaction
// larger than MaxHeldBytes reaches the downstream in consecutive batches (a
// downstream applying each batch as a transaction commits it in parts; a
// recovery from the checkpoint, below it, replays it whole). The checkpoint
// stays below every span's first event the log owns and has not delivered,
// so GC keeps what a read-back needs.
//
// # Shutdown and failures
//
// Close stops new writes, closes the redo writer (flushing what is resolved),
// waits until G covers the writer's final flushed ts, releases what that
// covers (reading back what the log owns up to it) and drops the rest
// (events above the flushed ts are not in the log: the span's next owner
// writes them again). A downstream that fails makes Run return its error
// with the failed batch still held (or, read back, still the log's): Run
// again retries it, so Downstream.Apply must be idempotent (a CDC sink in
// safe mode is; ApplyTo is the bridge to an apply sink in that mode). A
// read-back that fails fails Run the same way. Failures to read G or to
// report the checkpoint are retried, not fatal. Close is idempotent: a
// second call returns the first one's result.
package sinkgate
