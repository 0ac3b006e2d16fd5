// Package conformance is the test suite a redokit storage backend must pass
// before it holds a redo log. It proves, through the portable [blob.Bucket],
// that a [driver.Driver] keeps the blob contract the redo writer, reader and GC
// rely on. Backend authors import it from a test, with a MakeBucket that
// calls their backend's New (which takes no context; see docs/BACKENDS.md,
// "The shape of a backend"):
//
//	func TestConformance(t *testing.T) {
//		conformance.RunBucket(t, conformance.Harness{
//			MakeBucket: func(ctx context.Context, t conformance.TB) (*blob.Bucket, error) {
//				return mybackend.New(t.TempDir(), nil)
//			},
//			ConditionalWrites: true,
//		})
//	}
//
// # How it runs
//
// RunBucket runs every check twice: under "Plain" on the bucket the harness
// makes, and under "Prefixed" on a view of it, bucket.Prefixed([Prefix]).
// Before each Prefixed subtest it writes two siblings beside the prefix
// through the unprefixed bucket, "conformance-prefix-sibling" and
// "conformance-prefix0"; the view must never list, read or delete them (they
// sort just before and just after everything under the prefix, so a driver
// that matches prefixes loosely or pages past the end of one shows them), and
// they are checked intact when the subtest ends.
//
// Every subtest gets a new bucket from Harness.MakeBucket, which must be empty
// (the suite checks); the suite closes it when the subtest ends. Subtests run
// one at a time.
//
// Every subtest has a deadline: its context (t.Context(), and the ctx that
// MakeBucket and every driver call get) ends Harness.Timeout (default
// [DefaultTimeout], 2 minutes) after it starts, so a driver call that hangs
// fails the subtest named after the rule, saying it ran into its deadline,
// instead of the test binary's timeout. A subtest still running 30 seconds
// after its deadline (a call that ignores its context cannot be interrupted)
// fails, naming its rule, with every goroutine's stack in its log, and is
// abandoned: its goroutine is left behind (what it reports afterwards is
// dropped), and the run goes on with the next rule, so every later result
// is still reported. The deadline covers Harness.ListSettle's polls too: see
// "Read-after-write consistency".
//
// # What it proves
//
// Each subtest is named after the rule it proves, so a failure names the rule:
//
//	RoundTrip          0 B, 1 B, 1 MiB and LargeObject bytes come back byte-exact with the
//	                   right Size; a Put of unknown size (size < 0); overwrite, last writer wins
//	Concurrent         parallel writers and readers of distinct keys
//	Atomic             an object is invisible to Stat, reads and List until its Put returns,
//	                   an overwritten one reads whole and old until then; a Put whose context
//	                   is canceled mid-body fails with context.Canceled and leaves nothing (or
//	                   the old object) behind, as does a Put whose reader fails
//	RangedRead         offset to end, middle, length 0, ranges past the end read empty, a
//	                   negative offset is ErrInvalidArgument; readers pass iotest.TestReader
//	NotExist           Stat and reads of a missing key match ErrNotExist and name the key,
//	                   including a key that is only a "directory" of others and another
//	                   case of an existing key ("Key" exists, "key" does not)
//	Keys               unicode, spaces, URL-special characters, dot-names, NFC and NFD
//	                   spellings (distinct keys), keys differing only by case (distinct
//	                   objects, read back and deleted one by one: Case), ~900-byte keys;
//	                   invalid keys are ErrInvalidKey
//	ListOrder          listing is in byte order ("a-b" < "a/b" < "a0"), not file-walk order
//	ListPrefix         prefixes are strings, not directories ("order/a" matches "order/a-b")
//	ListLiteralPrefix  a prefix matches byte for byte: "_", "%", "*", "?", "[" and "\" in it are
//	                   no pattern (SQL LIKE, glob), and "lit/case/" does not match "lit/Case/x"
//	ListPages          page sizes 1..N+1 give the same listing, no page too long
//	ListThousands      1,009 keys list whole in pages of 1,000 (Bucket.List and ListPage), and
//	                   from a cursor at the end of the first page: a listing cut at a full page
//	                   loses every key after it (BatchDelete's listings of 2,500 keys catch
//	                   that too)
//	ListStartAfter     StartAfter an existing key, between keys, before and after all
//	ListWhilePaging    keys inserted after the cursor appear, keys deleted after it do not,
//	                   changes before it change nothing; no duplicates, nothing missing
//	ListWhileChanging  Churn: while keys are put, deleted and (Harness.Append) sealed on another
//	                   goroutine, every listing, in pages of 1, 3 and 1000, holds each key that
//	                   existed throughout it once and in byte order, and a one-page listing each
//	                   object being sealed under one of its two names; Seal (Append): a Seal and
//	                   a one-page listing released together, round after round, never hide the
//	                   object
//	ListAfterWrite     an object whose Put (plain or IfNotExist) has returned is in the next
//	                   listing, from the start and from a cursor before it; a deleted one is not
//	Delete             deleting a missing key (once, twice, in a batch) succeeds; reads after
//	                   a delete are ErrNotExist; a deleted key can be created again
//	BatchDelete        2,500 keys go in 3 driver calls (Bucket.Stats) and are all gone
//	ConditionalCreate  IfNotExist: a second create fails with ErrPreconditionFailed and keeps
//	                   the first content; 16 racers: exactly one winner, its content kept
//	CompareAndSwap     IfMatch: the right ETag wins, a stale or bogus one and any ETag on a
//	                   missing key fail with ErrPreconditionFailed; the ETag changes whenever
//	                   the content does; 16 racers on one ETag: exactly one winner
//	ReadAfterWrite     metadata-sized objects (a few hundred bytes, like a redo log's meta
//	                   objects): a read right after an overwrite returns the new body, whole and
//	                   by range; a Stat right after a Put returns that Put's ETag and size, at
//	                   300 bytes and 64 KiB (StatAfterOverwrite: a stale Stat, which
//	                   CompareAndSwap/Sequence also catches); a Stat's ETag pairs with the body read right after it (Stat,
//	                   read, Stat, as package meta reads); a Put IfMatch the ETag a Stat returned
//	                   wins only when the body read with that Stat is the version it names;
//	                   a driver.VersionReader's ReadVersion returns the last Put's bytes with
//	                   that Put's ETag, which a Put IfMatch then wins with
//	BeforeCommit       PutOptions.BeforeCommit runs once, while a read of the key still shows
//	                   the old object or nothing; its error abandons the put, leaving the key
//	                   as it was (a driver.Stager calls it itself, between staging and commit)
//	ModTime            the ModTime Put returns, Stat reports and a listing shows (Bucket.List and
//	                   ListPage) is the time of the object's last write within ModTimeTolerance
//	                   (a minute of clock skew): gc --grace keeps segments by the listed ModTime,
//	                   so a zero one, or one hours off, loses new segments
//	Context            an expired or canceled context fails every operation with an error
//	                   matching context.DeadlineExceeded or context.Canceled, changing nothing
//	Closed             every operation after Close fails with ErrClosed; Close is idempotent
//	As                 As(nil) and As of a type the driver does not have report false
//	Append             (Harness.Append) OpenAppend, Write, Sync, read back; Truncate; Seal to
//	                   a final key, failing with ErrPreconditionFailed onto an existing key;
//	                   reopening appends after the existing bytes; without the capability,
//	                   OpenAppend is ErrNotSupported
//	Isolation          (Prefixed only) what the view writes is under the prefix in the whole
//	                   bucket; nothing outside the prefix is visible through the view
//
// # Capabilities
//
// A harness declares what its driver can do instead of skipping inside the
// driver. Append must match the driver exactly (the suite fails if a driver
// implements [driver.Appender] undeclared, or declares it without implementing
// it). A backend without atomic conditional writes sets ConditionalWrites to
// false and says why in ConditionalWritesReason: the conditional subtests are
// then skipped with that reason, and the suite instead checks that conditional
// Puts are refused (ErrNotSupported or ErrPreconditionFailed), never silently
// applied as plain overwrites. Such a backend cannot hold a redo log's meta
// objects (writer fencing needs both conditions).
//
// # Key layout
//
// No two keys the suite writes at once are such that one is a "directory" of
// the other ("a" and "a/b"): S3 allows it, but file systems and emulators
// that map keys to paths do not, and redokit's own layout never needs it.
// Keys do contain "/" at every depth, and keys that differ only by a
// character sorting before or after "/", because that is where a file-walk
// listing goes out of byte order.
//
// # Read-after-write consistency
//
// redokit requires a store whose listings and reads are read-after-write
// consistent, as S3, GCS and Azure Blob Storage are: an object whose Put has
// returned is in the next listing, a read returns the version a Put last
// returned for, and a Stat's ETag names the body a read right after it
// returns. A redo reader proves a log complete from listings (a listing
// that lags cannot prove absence), and package meta pairs a Stat's ETag
// with the body it reads, so a stale read (one that returns a version an
// overwrite has already replaced) moves a checkpoint backwards.
// ListAfterWrite and ReadAfterWrite prove both, and every check looks once.
//
// Harness.ListSettle bounds how long a new or deleted key may take to show in
// List on a store that lags: checks that a listing reaches a state poll it
// until then (0, the default, is one look). It is the blob suite's own
// timing only: checks that something must never be listed are not relaxed,
// reads never are, and package conformance/redo refuses a harness that
// sets it, since such a store cannot hold a redo log.
//
// The polls run inside their rule's deadline (Harness.Timeout). Each poll
// lists the whole prefix, page by page, so a rule that settles n times on a
// listing of p pages can take up to n × (ListSettle + p × a page's latency)
// when the store lags to the limit: ListAfterWrite settles about 20 times on
// one-page listings, BatchDelete twice (three pages, then one) and
// ListThousands once on two. With ListSettle = 5s and a store that uses it, ListAfterWrite alone
// needs close to 2 minutes, the default Timeout: raise Timeout with
// ListSettle, or a lag the harness allows fails as a deadline.
//
// # What it cannot see
//
// The suite sees a backend only through blob.Bucket, so it cannot prove that
// a canceled multipart upload was aborted on the server, that a local Put was
// fsynced, or that a request was retried; each backend proves those in its
// own tests (a fault-injecting file system, a server's list of uploads).
//
// # The redo tier
//
// Package conformance/redo runs a real redo log (writer, reader,
// coordinator, fencing, GC) on the same Harness, with two fault tiers: a
// lying store (the history checker of conformance/torture through a
// blobtest.Liar) and a failing network (latency, resets, a stall, a slow
// link, through a proxy the harness gives or injected in the driver). It is a
// package of its own so that this one imports nothing above blob: a backend
// author certifying a driver does not build the writer, reader or their
// dependencies. Suites like it are built on [Harness.Subtest] and
// [Harness.Bucket], which give their subtests the deadlines, hang watch and
// fresh, checked buckets this suite's have.
//
// # Running it from a program
//
// The suites run on a [T]: [Std] adapts a *testing.T, and a [Recorder] runs
// them outside go test ([RunBucketOn]), recording each subtest's result.
// `redokit check` runs this suite that way against a live bucket, under a
// scratch prefix.
//
// # Testing the suite
//
// The package's own tests run the suite on the in-memory backend, which must
// pass, and on deliberately broken drivers (a non-atomic put, an unmapped
// not-found error, an unsorted or key-dropping listing, a listing that
// matches prefixes as LIKE patterns or ignoring case, one that loses an
// object sealed while it runs, one that hangs, one that ignores its context
// and never returns, a failing delete of a missing key, an ignored
// IfNotExist, an off-by-one range, an ETag that never changes, a listing
// that shows new objects a second late, reads of small objects that return
// the replaced body for a second after an overwrite, a listing that ends at
// a full page of 1,000, a Stat served from a cache overwrites do not clear,
// a case-insensitive store, a listing without ModTimes, ModTimes two hours
// off, and more), each of which must fail the subtest that names its rule;
// the rules a single assertion used to guard (a page of more than 1,000
// keys, a stale Stat ETag, case-insensitive keys) are each caught by at
// least two. They run the suite on a [Recorder], to watch a subtest fail
// without failing themselves, and once under go test itself
// (TestHungSubtestStd), to show a hung subtest fails and the run goes on.
package conformance
