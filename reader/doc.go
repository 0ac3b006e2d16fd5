// Package reader streams a range of a redo log in commit-ts order, the way a
// recovery replays it, and verifies a whole log.
//
// # Reading
//
// [Open] reads the range (StartTs, EndTs] of one log: every event with
// StartTs < commit ts ≤ EndTs, in commit-ts order, and at each commit ts
// every row change before any DDL. A recovery reads (checkpoint ts, global
// resolved ts], which is the default when Options.EndTs is 0: Open takes it
// from the log's meta object (ErrNoRange when there is none). Events come
// from [Reader.Next], the [Reader.Events] iterator, or [Reader.NextBatch] for
// throughput; each is valid until the next call.
//
// # Selecting segments
//
// Open lists the log's segment prefix (<log>/seg/) once and selects from the
// names alone, reading no object:
//
//   - a sealed segment <epoch>-<seq>-<min ts>-<max ts>.seg is read unless
//     max ts ≤ StartTs or min ts > EndTs;
//   - an active segment <epoch>-<seq>.active has no ts range in its name. On
//     a backend that can append (local disk) it is read, whatever the range.
//     Object stores never receive active segments, so one there is a
//     *segment.CorruptionError naming its key. An active segment listed next
//     to a sealed one of the same writer, epoch and seq is the two sides of a
//     rename: the sealed one is read;
//   - the fence rule applies next ([meta.WriterState.Accepts], writer states
//     read after the listing so that a takeover in between only makes the
//     reader stricter): a segment a fenced epoch committed after its fence is
//     ignored, and so are the events of a fenced epoch above its committed
//     ts (its fence's CommittedTs; MaxTs for a fence a version-2 or 3 state
//     recorded): events a writer staged above its committed ts (stored
//     before they were resolved, to bound its memory) count only once a
//     durable progress frame commits them, and a zombie's flush into the
//     segment its fence accepts (on local disk, the active segment of the
//     fence's last seq) was never acknowledged (Stats.AboveFence). The
//     fence's MaxTs, the largest commit ts of the epoch's chain, staged
//     events included, is what the completeness proof uses. The current
//     epoch of a writer needs no cut: a read ends at or below what every
//     writer published as flushed, and its staged events lie above that. A
//     writer with no state object never held a lease, so nothing fences it:
//     all its segments are read;
//   - the completeness rule applies last (see Completeness): Open proves
//     that no segment the range needs is missing, or fails;
//   - a key under the prefix that is not a segment name stops Open, naming it
//     (it may be a segment the range needs); Options.SkipBadNames logs and
//     skips it instead.
//
// # Freshness and the proven bound
//
// Open reads the log's meta object before the writer states and holds the
// states against it (meta.CheckStates): a state older than the generation
// the meta object accounted for its writer, or a meta object older than one
// a writer saw, is meta.ErrStale naming both objects: a stale state would
// prove a chain only up to an old seq. What the states publish proves the
// log complete up to the global resolved ts, or the lowest flushed ts the
// writers published when that is higher; a range whose end is above that
// bound is ErrUnproven, naming it, since events there may still be written
// or lie in segments no state names yet.
//
// # Completeness
//
// A read proves that it holds every event the writers published in its
// range before it returns the first one; docs/FORMAT.md ("Reading a log:
// the completeness rule") is the spec. Each writer epoch's segments form a
// chain: seqs are consecutive, and each segment's header links its
// predecessor (segment.Link: its seq, the largest commit ts of the epoch's
// segments up to it, its header and footer CRCs). For every writer epoch
// that can hold events of the range — the current epoch of each writer
// state that published (last seq P = its Seq, chain max = ChainMaxTs,
// digest = Digest), each fenced epoch (P, max and digest from the fence),
// and each epoch of a writer with segments but no state object (P = the
// highest seq listed: weaker, a lost last segment cannot be told from one
// never written) — the accepted segments up to P must form a gapless chain
// from the first one the range needs:
//
//   - an epoch whose chain max is at or below StartTs needs nothing;
//   - segment P must be listed;
//   - from P down while seq−1 is listed is the run [m, P]; Open reads m's
//     header (one ranged read, which m's stream reuses) and requires that m
//     be the first of its epoch (with nothing of the epoch listed below it)
//     or that its link's PrevMaxTs be at or below StartTs: everything below
//     m held nothing the range needs (GC collected it);
//   - every segment a stream opens holds what its name says, claims to be
//     first of its epoch only when seq−1 is not listed, matches the CRCs its
//     opened neighbours link, and, when it is P, has the published digest;
//   - no seq the range needs is listed under two sealed names.
//
// The writer states that give P are read before the listing (a published
// segment was visible before the listing began, so it is listed), and again
// after it for the fences. A seq the proof needs that the listing lacks is
// first listed alone (a listing is not a proof of absence): a key found
// there, or a segment that vanishes between the listing and the read of its
// header (GC ran meanwhile), makes Open list and plan again, at most 3
// times, the one policy of internal/chain that the writer's recovery and
// Verify follow too. Every failure is a *ChainError matching ErrIncomplete,
// naming the writer, the epoch, the missing or faulty seq and the key
// expected (a pattern, L/seg/W/<epoch>-<seq>-*.seg, when the segment is
// missing). The checks of Open come before any event is returned; those of
// a stream come when the merge reaches it, before any of its events.
//
// GC deletes only the bottom of each chain (package gc), so a read from the
// checkpoint or above always has its proof; a read from below it needs what
// GC removed and fails.
//
// # The merge
//
// Every segment is sorted by commit ts, but segments of one writer may
// overlap: a span that moves to a writer whose flushed ts is already ahead of
// it gets catch-up runs of its own. The reader merges lazily by min ts. It
// keeps a heap of open streams, ordered by the commit ts of their next event,
// and the list of not yet opened sealed segments sorted by the min ts in their
// names. Before it returns an event at ts T it opens every segment whose min
// ts is ≤ T (starting all of them before it waits for the first block of
// any, so that those are read and decoded in parallel), so any number of
// overlapping sorted runs read back in order, and
// only segments that overlap the frontier are open at once (normally one per
// writer, plus Options.Lookahead started early so the next segment of a writer
// is ready when the previous one ends). Active segments, whose range is
// unknown, are open from the start. Ties at one commit ts are broken by
// (writer, epoch, seq), so a read is deterministic.
//
// One exception keeps a big transaction from opening a stream per segment:
// point segments, whose names say they hold one commit ts T only ([T, T]: a
// transaction too big for one segment, staged in pieces), are opened one
// after another. When the frontier reaches T, the other segments whose min
// ts is T open first; then one point segment of T, and the next when it
// ends (plus Options.Lookahead started early), so a transaction split into
// any number of segments costs the streams of one. The order at T stays
// that of (writer, epoch, seq): the point segments of T open in that order,
// and each ends before the next opens.
//
// At each commit ts, DDLs are held back (copied; there are few) and
// delivered after the last row of that ts, whatever order the segments hold
// them in.
//
// # Streams, prefetch and memory
//
// Each open segment is a stream: a goroutine reads its blocks, checks their
// CRC32C (the segment package does), decompresses them, decodes the events in
// the range (a codec.Decoder per stream, which parses a column definition it
// has seen only to compare it; Options.Raw skips this, and so do cold
// streams, below) and applies the table filter, then sends the block's
// events as one chunk on a channel of
// Options.Prefetch chunks. So I/O, decompression and decoding of all open
// segments overlap each other and the merge; Options.Concurrency bounds how
// many blocks are decoded at once. A sealed segment costs one ranged read for
// its trailer and footer, one for its header, and one ranged stream over the
// blocks the range needs: the footer's index skips the blocks at or below
// StartTs (segment.Reader.SeekTs) and stops at the first block above EndTs. An
// active segment is scanned from its start, up to the length it had when the
// read began (a live writer's later appends are not half-read).
//
// A sealed segment's stream reads with one segment.Reader, which
// decompresses each block into the buffer of the chunk that takes it
// (segment.Reader.ReadBlockInto), so the payloads of its events, and the
// byte values decoded from them, point into that buffer and are never
// copied. The compressed frame and the segment's tail are read into buffers
// shared by all streams for the moment they are needed, and a finished
// stream's chunks, buffers included, go to the streams that follow, so an
// open stream holds its chunks and little else. (An active segment is one
// stream through one Scanner, so its payloads are copied, once, into the
// chunk.)
//
// Chunks are recycled, and each stream owns at most Prefetch+2 of them
// (Prefetch waiting, one being filled, one being merged): a producer that has
// them all waits for the merge to give one back. Memory is therefore bounded
// by open streams × (Prefetch+2) decoded blocks, never by a segment's or the
// log's size. [Reader.Stats] reports the most streams and chunks alive at
// once. An event handed out stays valid until the next call, because its
// chunk is given back only then; NextBatch returns early rather than wait for
// a chunk while it holds events, so it can never hold a stream's whole pool.
//
// Prefetch adapts to many open streams (many overlapping segments: a writer
// that spilled under memory pressure while a span lagged). While few are
// open (2×Concurrency+4) each reads ahead as above. Beyond that, a stream
// holds the chunk the merge reads and nothing more, its producer waiting
// until the merge is through with it, except the few whose chunks in the
// merge end at the smallest commit ts, the ones the merge will need the next
// chunk of first (the forecast of an external merge sort): those read one
// chunk ahead. Nor does a cold stream's producer decode its chunk (unless a
// TableFilter needs the decoded table): the chunk keeps its block's bytes and,
// of each event, the commit ts, kind and payload (33 bytes), and the merge
// decodes each event as it returns it, into Events of the Reader's that it
// reuses call after call; a raw read's chunks are always so. Hundreds of open
// streams then do not each hold a block's worth of decoded events, nor
// allocate one. Memory is then about one block per open stream, plus a few
// decoded ones, and the chunks of the events a call returned.
//
// # Duplicates
//
// Failover rewrites events: a span restarted from the checkpoint on another
// writer (or a new epoch of the same one) writes again what its old owner
// already made durable, and a zombie's late segment may hold a copy too. The
// reader drops exact duplicates unless Options.KeepDuplicates is set.
//
// Two events are exact duplicates when their encoded bytes are identical: the
// same kind, commit ts, start ts, table, and complete row images (or the same
// DDL). Copies inside one segment are never duplicates of each other: a
// segment is a faithful record of its writer's spans, so two identical rows
// there are two changes (a transaction inserting the same values twice into a
// table without a key). Nor are copies in two segments of one writer epoch
// (format version 4): its segments partition its events (a transaction too
// big for one segment is split across several), so they never hold copies
// of each other, except a catch-up segment (segment.FlagCatchUp: a span
// added behind the writer, which may write again what the epoch holds). A
// copy in a segment of another writer epoch, or in a catch-up segment, or in
// any segment older than format version 4 (whose writers did not flag
// catch-up segments), is a rewrite.
//
// So the reader counts copies by unit: the version-4 segments of a writer
// epoch without the catch-up flag are one unit, every other segment a unit
// of its own. At each commit ts it delivers, of each distinct encoding, as
// many copies as the unit holding most of them has, and drops the rest. It
// identifies encodings by a 128-bit hash (two seeded 64-bit maphashes), and
// only at a commit ts that segments of more than one unit hold events at,
// so a ts that one writer epoch alone covers costs nothing, however many
// segments hold it (Stats.Hashed counts the events hashed); its memory is
// bounded by the events of one commit ts. Whether a point segment the merge
// has not opened yet is a catch-up segment is in its header, which the
// reader reads when the ts begins (its stream reuses the read) if that
// decides whether to hash.
//
// Byte equality can only mistake two changes for one when a transaction
// writes byte-identical rows, which needs a table without a primary or
// not-null unique key (CDC systems refuse such tables by default), and the
// per-unit rule keeps even those unless another writer epoch, a catch-up
// segment or, in a log older than format version 4, a writer's size split
// put copies into another unit. For such tables set KeepDuplicates; with it
// the reader returns every copy and leaves idempotence to the sink.
//
// # Integrity
//
// Every block's CRC is checked before it is used. Only an active segment on
// an appendable backend may end torn (its valid prefix is read, with a
// warning); every other failure is an error naming the object key and the
// byte offset (*segment.CorruptionError, matched by segment.ErrCorrupt): a
// bad block in a sealed segment, a sealed segment whose header or footer
// disagrees with its name (the merge trusts the name's min ts), an event that
// does not decode or whose commit ts or kind differ from its record. Nothing
// is skipped silently. An event below one already returned is an *OrderError.
// No event outside the range is ever returned.
//
// # Following
//
// [Follow] reads a log as it grows, for a warm standby: every event above a
// start ts, in order, without end. It reads in rounds, each an ordinary
// bounded read of (position, global resolved ts] opened with Open, so each
// round is proven complete (fences, takeovers, staged and catch-up
// segments, GC below it) exactly as a recovery's read is; between rounds it
// polls the meta object until the global resolved ts moves above its
// position. Rounds end between commit ts, so no event is returned twice
// and none is skipped; its memory is one round's reader's. An older meta
// object (a lagging replica or cache) can only hold it back: it never reads
// above a resolved ts the log published. A round whose Open cannot prove
// what it read fresh (ErrUnproven, meta.ErrStale, meta.ErrInconsistent),
// finds a segment gone between its listing and its read (GC below the
// position) or meets a transient store error is opened again, for at most
// FollowOptions.OpenTimeout, before the follower fails; so is a round that
// fails part way because the log changed under it (a takeover's recovery
// cut or sealed a segment it was reading), from the position, passing over
// the events of the commit ts at hand that it returned already (a multiset
// of their payload hashes, byte-identical copies counted one by one; past
// 1 M events at one ts such a failure is final instead). Corruption is
// never read again. Position says what
// it has returned (all events at or below it), Lag how far behind the
// newest global resolved ts it saw it is, in ts and in time. A start below
// the checkpoint whose segments GC deleted fails with ErrIncomplete naming
// the gap; a log removed under it, ErrLogGone.
//
// # Verify
//
// [Verify] walks a whole log and reports every problem it finds, each with its
// key and, where it has one, its offset: names that do not parse, corrupt
// blocks (every one, not only the first of a segment), events that do not
// decode, headers and footers that disagree with their names, active segments
// on an object store; chains that are incomplete from the meta object's
// checkpoint (from 0 without one), links between neighbours that do not
// match (CRCs, the largest commit ts below), and published digests or chain
// maxima the segments contradict; every object under the log's prefix that
// is not a key the log writes (<log>/meta, <log>/writers/<ID>,
// <log>/seg/<segment name>, <log>/~deleting), names that are not UTF-8 or
// hold control characters and a seg that is an object (a symbolic link)
// among them; every writer state or meta object that fails to read or
// decode; and the meta object and the writer states against each other (one
// listing, then the meta object, then each state, once): a stale state or
// meta object (meta.CheckStates), a live writer without a state or at an
// older epoch than the meta object saw, a segment of an epoch its writer
// never reached, a checkpoint above the resolved ts (ProblemMeta;
// VerifyOptions.RequireMeta makes a missing meta object one too). As
// information it reports torn tails of active segments, segments ignored by
// fences, the events each fenced epoch holds above its committed ts
// (ProblemStaged: staged, never committed; Report.Uncommitted totals them)
// and a pending delete marker. It totals segments, blocks, events and
// bytes.
package reader
