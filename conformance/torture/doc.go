// Package torture is redokit's history checker: a randomized workload of
// writers, a coordinator, a checkpoint-advancing sink, GC and readers over
// any bucket, whose every acknowledged flush is recorded and whose every
// read is checked against what the upstream produced. conformance/redo.Run
// runs it through a blobtest.Liar (lost answers, refused writes, delays,
// reordered answers) as its Faults tier, `redokit torture` runs it on a real
// bucket with writer processes killed by SIGKILL, and the randomized fault
// schedules of this package's tests run it on mem and local disk.
//
// # The upstream
//
// Events are a pure function of (seed, span, commit ts) ([Gen]): at each ts
// a span holds zero to three rows and, now and then, a DDL after them. Every
// event is distinct (its row ID encodes span, ts and position), so a copy a
// failover writes again is byte-identical to the first, and the reader's
// duplicate rule (of each distinct encoding, as many copies as the segment
// holding most of them) must return each event exactly once. A writer that
// takes a span on at start ts S is given every event of the span above S,
// in order, before the span's resolved ts passes them.
//
// # The workload
//
// Several writer IDs share the spans. At each step the clock moves on, each
// span's events go to its owner, and every span's resolved ts is advanced;
// now and then the writers flush, all at once. Now and then a writer fails
// over: it is closed, or abandoned (left running as a zombie, flushed and
// closed later), and its writer ID is opened again (a new epoch, under a
// context marked blobtest.WithTakeover); its spans move to random writers,
// each restarting from the log's checkpoint or from the span's highest
// acknowledged ts. A writer that fails (a flush past its retries, a fence) is
// failed over the same way. Beside the upstream, goroutines run the
// coordinator (ticking, and a sink that moves the checkpoint to a random ts
// at or below the global resolved ts and at or below what a read returned
// whole: a sink applies before it checkpoints), GC at the checkpoint, and
// readers of (checkpoint, global resolved], all while the writers write.
//
// With Config.GrowSpans, spans are added during the run as a DDL that
// creates a table adds them: a coordinator of its own sets a barrier at the
// upstream's clock, registers the span at the barrier's ts and releases the
// barrier; a writer takes the span on a few steps later. From the moment
// the barrier is set the checker expects the span's events above its ts in
// every range the global resolved ts promises.
//
// With Config.MemoryQuota (redokit torture --quota), every writer's memory
// quota is that small (FlushBytes a quarter of it), and now and then one
// span lags for a few steps: its events are written, its resolved ts stays
// behind, as a long transaction holds a span back, and its writer's
// resolved ts stands still. The writers stage: a Write blocked on the full
// quota, or FlushBytes written while the writer's resolved ts stands
// still, makes a stage cut, which stores the buffered events above the
// epoch's committed ts before they are resolved. Such events are part of
// the log only once a later progress frame's committed ts covers them; a
// takeover cuts the fenced epoch at its committed ts, and the spans' next
// owners write the events above it again. The report counts the stage
// cuts, the staged events, the Writes let through over the quota and the
// events left above fenced epochs' committed ts; a run under a forced
// quota that never staged says so in its verdict. The workload's events
// are small (a few hundred bytes per span and step): StageQuota fills,
// 1 MiB never does.
//
// An acknowledged flush is a flushed ts F a writer reported (Flush returned
// it without error): every event of each of its spans in (S, F] is
// acknowledged, S being where the writer took the span on.
//
// # Rules
//
// Each rule has a name, printed with the evidence when it is broken:
//
//	exactly-once            a read returned an event twice
//	commit-ts-order         a read returned an event below one before it
//	rows-before-ddl         a read returned a row after a DDL of its commit ts
//	silently-altered        a read returned an event the upstream never produced
//	nothing-above-resolved  a read returned an event outside its range: above the
//	                        global resolved ts, or at or below its start
//	read-short              a read that ended without an error lacks an event the
//	                        range must hold: every upstream event above the
//	                        checkpoint (as it stood when the read ended) and at or
//	                        below the global resolved ts it read to
//	acknowledged-lost       after the run, with the faults off, an acknowledged
//	                        event above the final checkpoint cannot be read (it is
//	                        missing, or the read fails)
//	watermark-monotonic     the global resolved ts went backwards
//	checkpoint-monotonic    the checkpoint went backwards
//	checkpoint-le-resolved  the checkpoint passed the global resolved ts
//	gc-safe                 GC deleted a segment whose max commit ts is not below
//	                        every checkpoint ever set, or an active segment,
//	                        that its writer's state does not supersede (a
//	                        zombie's, or a fenced epoch's below the checkpoint)
//	no-wrongful-fence       a writer was told it was fenced while its state object
//	                        still holds its own epoch (no newer epoch exists)
//	verify-clean            after the run, reader.Verify reports an error
//	liveness                an operation could not complete within its bound
//	                        (a writer that could not be opened, a hang)
//	epoch-unique            two opens of a writer ID held one epoch, or an open
//	                        took an epoch at or below one whose segments were
//	                        already in the log (writer processes record the
//	                        epoch each open took in their history)
//	nothing-uncommitted     after the run, a final read returned an event of a
//	                        fenced writer epoch above its fence's committed ts
//	                        (staged and never committed, or written past the
//	                        fence); the duplicate filter would hide it from the
//	                        other rules when the next owner wrote it again
//
// Store errors may fail a write (which then is not acknowledged), a read
// (which then proves nothing) or a coordinator tick: none of them is a
// violation. Silence is: an acknowledged event missing from a read that
// reported no error. An error matching meta.ErrStale (a metadata object
// older than one already seen, caught) is counted (Counts.StaleCaught),
// beside the stale serves of the Liar's blobtest.Stale (Report.StaleServes),
// so that a run under stale reads shows how many it served and caught.
package torture
