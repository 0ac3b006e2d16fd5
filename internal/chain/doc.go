// Package chain is the one home of the rules of a writer epoch's segment
// chain (docs/FORMAT.md, "The chain" and "Reading a log: the completeness
// rule"). Every package that draws a conclusion from a listing of segments
// draws it here:
//
//   - the listing index: a listing grouped by writer, epoch and seq, of an
//     active and a sealed name of one seq the sealed one (Index), and the
//     one policy for a listing that misses a seq: a narrow listing of that
//     seq alone (Probe), and when it finds the key, the caller lists again,
//     at most Relists times, then fails naming the key (Stale);
//   - the link arithmetic: the chain max ts through a segment (ChainMaxOf),
//     the link its successor carries (Successor), how many of a
//     predecessor's whole blocks a link names (LinkedPrefix: all of a
//     sealed one, a prefix of an active one), and the check of a link
//     against what is known of its predecessor (LinkMismatch);
//   - the writer's recovery walk: what an epoch made durable beyond what
//     it published (Durable);
//   - the reader's completeness proof (Reqs, Check, Prove, SealedTwice,
//     Error, ErrIncomplete);
//   - GC's collectable rule: the bottom prefix of each epoch's chain below
//     the checkpoint (Collector).
//
// writer, reader, gc and the verifier call it; none restates a rule.
package chain
