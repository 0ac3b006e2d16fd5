// Package local is redokit's file-system backend, the default one: a
// [driver.Driver] that keeps each object in a file under a root directory, makes
// every acknowledged write durable (file and directory fsync), makes
// conditional writes atomic across processes, and has the [driver.Appender]
// capability the redo writer uses for its active segment.
//
// It is unix-only (Linux is the tested platform; other unix systems build and
// use the portable fallbacks noted below).
//
// # URL
//
//	file:///abs/dir                  the root must exist and be a directory
//	file:///abs/dir?create_dir=true  mkdir -p the root first
//
// The path must be absolute; a relative or empty path, a host other than
// "localhost", and any other query parameter are errors that name them.
//
// # Layout
//
// An object with key "a/b/c" is the regular file <root>/a/b/c: key segments
// are directories. So a key and a key below it ("a" and "a/b") cannot both
// exist; the second Put fails with [blob.CodeInvalidArgument] and an error that
// names both, and nothing is changed. The file system's own limits apply: a key
// segment longer than NAME_MAX (255 bytes on Linux) is rejected as an invalid
// argument, and on a case-insensitive file system "A" and "a" are one object.
//
// The driver keeps its own state under one reserved name in the root:
//
//	<root>/.redokit/tmp/<random>.tmp  Put's temporary files
//	<root>/.redokit/lock/<00..3f>     lock files of the 64 key stripes
//
// A key whose first segment is ".redokit" is rejected with
// [blob.ErrInvalidKey], and List never looks inside it, so no key can name,
// list or overwrite an internal file. Temporary files never live next to
// objects, so a listing can never show one.
//
// # Symbolic links
//
// Keys never leave the root. Every path is resolved one segment at a time
// from an open descriptor of the root, with O_NOFOLLOW at each step
// (openat(2), mkdirat(2), renameat(2), fstatat(2) with AT_SYMLINK_NOFOLLOW), so
// a symbolic link anywhere below the root is never followed: an operation whose
// path crosses one (a List whose prefix does included) fails with
// [blob.CodeInvalidArgument] naming it, and List shows the link itself as an
// object, so that a log whose segment directory was replaced by a link is
// reported, not read as empty. (A link that is itself the final component may be replaced by a
// Put, which does not follow it either, or removed by a Delete.) The root may
// itself be reached through a link: it is resolved once, at open.
//
// # Put
//
//  1. create <root>/.redokit/tmp/<random>.tmp (O_EXCL) and flock(2) it, so a
//     sweep can tell an abandoned temporary file from one being written;
//  2. copy the bytes into it, checking ctx between chunks;
//  3. set its mtime to the current time (microseconds) plus a random
//     0–999 ns (see ETags), fsync it;
//  4. open or create each directory of the key's path; a directory this
//     driver creates has its parent fsynced at once, and an existing one has
//     its parent fsynced the first time this driver uses it (another process
//     may have created it and not synced it yet);
//  5. under the key's stripe lock (see Locking): check the condition, rename
//     the temporary file onto the key, fsync the key's directory.
//
// Any failure (including a canceled ctx, checked before step 5) removes the
// temporary file and leaves the old object, or none, in place. When the
// directory fsync of step 5 fails, Put reports the error although the new
// object is already visible; it may or may not survive a crash.
//
// A Put that dies (a crash, a kill) leaves an orphaned temporary file, never a
// partial object. The first write of each driver sweeps the tmp directory and
// removes every temporary file whose flock it can take: its writer is gone.
//
// # Conditional writes
//
// IfNotExist is decided by the kernel, atomically for every process on the
// machine (and on any file system where rename is atomic): the temporary file
// is renamed with renameat2(RENAME_NOREPLACE) (or, where that is unsupported,
// and on non-Linux systems, hard-linked with link(2), which never replaces,
// then unlinked), and EEXIST becomes [blob.CodePreconditionFailed]. (With
// the link fallback, a crash between the link and the unlink leaves the old
// name too: a stray temporary file for a Put, which the sweep removes; the
// active name beside the sealed one for a Seal.)
//
// IfMatch is a check-then-rename, made atomic by the key's stripe lock, held
// across the check and the rename. Since every change of a key's file (Put,
// Seal onto it, Delete) is made under the same lock, no other process can slip
// a change between the check and the rename.
//
// # Locking
//
// Keys are spread over 64 stripes by FNV-1a (32-bit) of the key modulo 64,
// and stripe i is the file <root>/.redokit/lock/<i as two hex digits>, locked
// with flock(2) LOCK_EX. Inside a process a per-stripe semaphore comes first,
// because flock locks belong to an open file description, which the driver
// shares among goroutines. The hash and the file names are part of the
// on-disk protocol: every process writing a root must agree on them. A wait
// for a lock honours ctx. A lock is held only across the check, the rename
// (or unlink) and, for a Put or a Seal, the directory fsync.
//
// flock is advisory: a process that changes files under the root without this
// driver is not excluded (IfNotExist stays atomic even then, IfMatch does not).
// On NFS, flock is emulated with byte-range locks by Linux clients.
//
// # ETags
//
// An ETag is "<inode>-<mtime ns>-<size>" in lowercase hex, with no quotes.
// Every Put writes a fresh inode whose mtime the driver sets (step 3 above) to
// the current time in whole microseconds plus a random number of nanoseconds
// below 1000, so two Puts of one key get different ETags even when the file
// system reuses a freed inode number at once and the sizes are equal: a
// collision needs the same inode, the same microsecond of wall-clock time on
// two writes that cannot overlap (the first must have freed the inode before
// the second created its file), and the same random value. File systems
// stamp mtimes with a coarse clock (a few milliseconds), which is why the
// driver sets it itself. Seal sets the mtime the same way. The mtime is
// also the object's ModTime.
//
// # Listing
//
// List yields keys in byte order of the key, which is not the order of a
// directory walk ("a-b" < "a/b" < "a.b" because '-' < '/' < '.'). It opens
// only the directory that can hold the prefix (the prefix up to its last
// "/"), reads each directory it visits in full, sorts the entries by name,
// with "/" appended to the names of directories, which puts each directory's
// keys exactly where they belong in byte order, skips whole subtrees at or
// before StartAfter (or the page token, which is the last key of the
// previous page), and stops as soon as it has one key more than a page.
//
// Directories, even empty ones, are not listed. Every other entry is, whatever
// it is and whatever its name: a regular file is an object; a link, a FIFO, a
// socket or a device is listed with the size lstat(2) gives, and reading or
// stat'ing it fails with [blob.CodeInvalidArgument] naming it (never
// [blob.CodeNotExist], which a caller could take for a concurrent delete); a
// name that is not a valid key segment (invalid UTF-8, a control character,
// or a path longer than [blob.MaxKeyLen]) is listed as it is, a key no Bucket
// call can address (see [blob.ListPage]). Hiding such an entry would hide the
// loss of whatever it was: a segment whose name a bad disk or a careless
// rename damaged. Only the driver's private directory is never listed.
//
// A listing never loses an entry that changes under it. A directory is read
// in one getdents(2) call, its buffer sized from the directory's size: the
// kernel holds the directory's lock for one call, which every rename, create
// and unlink in it takes, so one call is a snapshot. A read of several calls
// is not (a file renamed between two of them can have its new name in the
// part already read and its old one in the part not yet read: before
// 2026-12-07, listings of a 3,000-entry directory during a seal storm lost
// a segment so in about one test run in 150); past 64 MiB of entries, on a file system
// that answers short, and on systems other than Linux, the walk takes such
// a read only if the directory's change and modification times did not
// move during it, and reads again otherwise. Then entries are stat'ed one
// by one; an entry that vanishes, or turns
// into a directory or out of one, between the two (a segment sealed by
// rename, a directory pruned by Delete) makes the walk of its directory start
// over from a fresh read, which sees the entry's new name if it was renamed
// (a rename is atomic). So every object that exists throughout a List call is
// listed, and a file renamed within one directory during the call is listed
// under at least one of its names. A directory that changes under 16 re-reads
// in a row fails the call with an error naming it ([blob.CodeTransient])
// rather than give up silently; files already stat'ed are not stat'ed again,
// so each re-read only looks at what changed.
//
// # Delete
//
// Each key is unlinked under its stripe lock; a missing key is not an error.
// Each directory that lost an entry is fsynced once per call, then the
// emptied directories up to (never including) the root are removed, best
// effort. A Put racing with that removal re-opens the directory path and
// retries.
//
// # Appending
//
// [Driver.OpenAppend] opens the key's file with O_APPEND, creating it (and
// fsyncing its directory) if it is missing, and takes a non-blocking flock on
// it, so a second OpenAppend of the same key, from any process, fails with
// [blob.CodePreconditionFailed] while the first is open. Sync is fdatasync(2)
// (fsync(2) where that is missing), Truncate is ftruncate(2) and fsync(2).
// Seal stamps the mtime, fsyncs the file, renames it onto the final key the
// way IfNotExist does (under the final key's stripe lock), fsyncs both
// directories, and closes the file; if the rename fails, the file stays open
// under its key. After a crash every byte written before the last successful
// Sync is intact; bytes after it may be missing. StartWriteback
// (driver.WritebackStarter) is sync_file_range(2) with SYNC_FILE_RANGE_WRITE
// alone on Linux: it starts the write-out of a range and waits for nothing,
// and it leaves a write-back error for the next fdatasync to report.
//
// # Durability testing
//
// The package's crash test SIGKILLs a child process that appends, syncs,
// seals and puts, at random moments (REDOKIT_CRASH_TRIALS times, 5 by
// default), then checks that synced bytes, sealed segments and acknowledged
// objects survived whole and that nothing partial or temporary is visible. A
// SIGKILL does not drop the page cache, so that test proves atomicity and the
// absence of partial objects, not the fsyncs themselves. The fsyncs are proven
// by a unit test that traces every file operation through the driver's
// internal hook and checks that each rename is preceded by the sync of its
// file, that each acknowledged write is followed by the sync of every
// directory it changed, and that a failing sync fails the write.
//
// # Options and closing
//
// [Options] (nil means the defaults) set the permissions of new files and
// directories and can turn syncing off (NoSync: unsafe, for benchmarks only).
// After [Driver.Close] every operation fails with [blob.ErrClosed]; Close
// waits for operations that are using the root's descriptors to finish.
package local
