// Package redo is the redo-level conformance suite: it runs a real redo log
// (the redo writer, reader, coordinator, fencing and GC) on the buckets of a
// conformance.Harness, the one a backend passes to conformance.RunBucket, and
// then the fault tiers that a backend passing the blob contract can still
// fail:
//
//	func TestRedo(t *testing.T) { redo.Run(t, redo.Harness{Harness: harness}) }
//
// Faults runs the history checker of package conformance/torture through a
// blobtest.Liar that loses answers of writes it stored, refuses, delays and
// reorders them; Network keeps one writer writing while the network fails
// (latency, resets, a stall that clears, a slow link) and then reads the log
// back whole. Network breaks the network the harness gives (Harness.Network:
// a toxiproxy proxy in front of an emulator, with a check of what a fault
// can leave on the server), or, without one, injects the same faults in the
// driver with a blobtest.Faulty, so that every backend runs the tier. [Run]
// lists what each subtest proves.
//
// The store must be read-after-write consistent, in listings and in reads
// (the blob suite's ListAfterWrite and ReadAfterWrite rules): a redo log
// proves completeness from listings, and a listing that lags cannot prove
// absence. No check waits for a store to settle, and [Run] refuses a
// harness that sets conformance.Harness.ListSettle, naming the reason.
//
// It is apart from package conformance so that a backend author certifying
// only the blob contract builds nothing above package blob; this package
// needs the writer, reader, meta, gc and codec.
package redo
