// Package chain is the one home of the rules of a writer epoch's segment
// chain (docs/FORMAT.md, "The chain" and "Reading a log: the completeness
// rule"). Every package that draws a conclusion from a listing of segments
// draws it here:
//
//   - the listing index: a listing grouped by writer, epoch and seq, of an
//     active and a sealed name of one seq the sealed one (List, Parse,
//     NewIndex), and the one policy for a listing that misses a seq: a
//     narrow listing proves it absent before any conclusion is drawn from
//     its absence (Probe of one seq, where one missing seq fails the proof
//     anyway; ProbeEpoch where a conclusion rests on a whole run of missing
//     seqs), and when the narrow listing finds the key, the caller lists
//     again (Stale: a *MissedError, or a *VanishedError for a segment
//     listed and gone), at most Relists times, then fails naming the key
//     (Exhausted);
//   - the link arithmetic: the chain max ts through a segment (ChainMaxOf),
//     the link its successor carries (Successor), how many of a
//     predecessor's whole blocks a link names (LinkedPrefix: all of a
//     sealed one, a prefix of an active one), and the check of a link
//     against what is known of its predecessor (LinkMismatch);
//   - the writer's recovery: what an epoch made durable beyond what it
//     published (Durable, which reads the checkpoint with Checkpoint to
//     excuse what GC took), and which blocks of its unsealed segment the
//     fence covers (FencedBlocks) or its successor links (LinkedBlocks);
//   - the reader's completeness proof (Reqs, Check, Prove, Probes,
//     SealedTwice, ExpectedKey, Error, ErrIncomplete), which Verify applies
//     over its whole listing too;
//   - GC's collectable rule: the bottom prefix of each epoch's chain below
//     the checkpoint (Collector, Collectable).
//
// writer, reader, gc and the verifier call it; none restates a rule.
package chain
