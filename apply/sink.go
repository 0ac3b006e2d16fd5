package apply

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/redokit/redokit/codec"
)

// Source yields the events to replay, in commit-ts order with the rows of a
// commit ts before its DDLs; it ends after the last one, or with an error
// (the pair's second value), which stops Run. An event only has to stay
// valid until the next iteration: Run copies what it keeps. Run stops
// iterating when it fails or ctx ends, so a source that blocks should watch
// the same ctx.
//
// (*reader.Reader).Events is a Source, and so is [SliceSource] over events
// held in memory.
type Source = iter.Seq2[*codec.Event, error]

// SliceSource returns a Source over events held in memory: a range the
// caller already holds, such as a batch a sinkgate.Gate released. The slice
// is the batch shape the gate's Downstream and the redo writer take too, so
// a batch needs no copy to be replayed.
func SliceSource(events []codec.Event) Source {
	return func(yield func(*codec.Event, error) bool) {
		for i := range events {
			if !yield(&events[i], nil) {
				return
			}
		}
	}
}

// Table names a downstream table: the logical table of a row change (the
// partitions of a partitioned table are one Table).
type Table struct {
	Schema, Name string
}

// String returns "schema.name".
func (t Table) String() string { return t.Schema + "." + t.Name }

// TableOf returns the logical table of a codec table name.
func TableOf(n codec.TableName) Table { return Table{Schema: n.Schema, Name: n.Name} }

// Mark is the progress a transaction records for one table: every row change
// of the table with commit ts ≤ CommitTs is applied.
type Mark struct {
	Table    Table
	CommitTs uint64
}

// DDLMark is the progress recorded for DDLs: every DDL with commit ts below
// CommitTs is applied, and so are the first Count DDLs at CommitTs (in the
// order the source delivers them). The zero DDLMark means none.
type DDLMark struct {
	CommitTs uint64
	Count    int
}

// covers reports whether the DDL that is the index-th (from 0) at commit ts
// ts is covered by m.
func (m DDLMark) covers(ts uint64, index int) bool {
	return ts < m.CommitTs || ts == m.CommitTs && index < m.Count
}

// Progress is what a sink has recorded as applied.
type Progress struct {
	// Tables maps each table to the commit ts up to which (inclusive) its row
	// changes are applied. A table that is absent has nothing recorded.
	Tables map[Table]uint64
	// DDL is the last DDL applied.
	DDL DDLMark
}

// Sink is a downstream that Run replays into. The SQL sinks of packages
// apply/sqlite and apply/mysql implement it for SQLite and MySQL-compatible
// databases; third parties implement it for others (and may [Register] a URI
// scheme for [Open]).
//
// Run calls Progress before anything else, and again when a Commit failed
// with a transient error, to learn whether it committed anyway (possibly
// while other transactions are open). Row changes go through
// transactions: Begin, ApplyRows any number of times, then Commit (which
// records the marks in the same transaction as the data) or Rollback. Run
// holds up to Options.Workers transactions open at once, each from its own
// goroutine, and gives each table to exactly one of them at a time, so a sink
// never sees two open transactions write the same table. ApplyDDL is called
// only while no transaction is open. A sink reports errors worth retrying
// (lost connection, deadlock, lock timeout, busy database) wrapped with
// Transient; Run then rolls the transaction back, waits, and replays it whole
// in a new one.
type Sink interface {
	// Progress returns what the downstream has recorded. A fresh downstream
	// has an empty Progress.
	Progress(ctx context.Context) (Progress, error)
	// Begin starts a transaction.
	Begin(ctx context.Context) (Tx, error)
	// ApplyDDL runs one DDL and records mark as the last applied DDL; when it
	// can, in one transaction with the DDL.
	ApplyDDL(ctx context.Context, ddl *codec.DDL, mark DDLMark) error
	// Close releases the sink. Run does not call it.
	Close() error
}

// Tx is one transaction of a Sink.
type Tx interface {
	// ApplyRows applies row changes of one table, in commit-ts order. The
	// rows of one commit ts are never split across two calls (unless the
	// sink is a [CommitTsSplitter]): a call holds every row change of the
	// table at each commit ts it holds, so a sink may reorder within a
	// commit ts (the SQL sink runs deletes first).
	// The rows belong to Run and are not modified; they stay valid until
	// the transaction ends, and no longer: Run reuses their memory for the
	// rows it reads next, so a sink keeps nothing of them (not a value's
	// bytes) past Commit or Rollback.
	ApplyRows(ctx context.Context, table Table, rows []*codec.RowChange) error
	// Commit records marks (at most one per table) and commits, atomically.
	Commit(ctx context.Context, marks []Mark) error
	// Rollback abandons the transaction. It is called after a failed
	// ApplyRows or Commit too, and must not fail loudly then.
	Rollback() error
}

// Conflicts counts what an apply found downstream that the log did not lead
// it to expect: rows the replay overlapped. They are normal where the
// downstream ran past the log's checkpoint before the disaster (its own
// sink applied changes this replay applies again), and a sign of divergence
// elsewhere. Tables breaks the counts down by table.
type Conflicts struct {
	// Replaced counts rows written by deleting another row that held one
	// of their unique values: a stale row, outside the rows the batch
	// writes (see the SQL sinks' upsert). Unique values moving between the
	// rows a transaction changes are no conflict, and not counted. On
	// MySQL, whose upsert updates whichever row it meets on a unique key
	// (it cannot name a conflict target), a stale row that holds a unique
	// value of the written row while no row holds its key is updated into
	// it in place: the rows end the same, and that one is counted only
	// where the sink deleted the batch's keys of the table first (a batch
	// that also changes rows of it: see the SQL sinks' units), not in a
	// batch of new rows alone. So on SQLite with foreign-key checks on;
	// PostgreSQL and SQLite count it otherwise.
	Replaced int64 `json:"replaced"`
	// DeletesMissed counts deletes (and the old images of updates that
	// moved a row's key) that matched no row.
	DeletesMissed int64 `json:"deletes_missed"`
	// DuplicatedKeyless counts rows inserted into a table without a key
	// where the downstream already held a row identical to it, written by
	// something the sink's progress does not account for (the
	// downstream's own sink, which ran past the checkpoint). Identical
	// rows of such a table cannot be told apart, so the insert is applied,
	// and the table may now hold a row twice: this count is how many, at
	// most (a table without a key may hold identical rows legitimately).
	DuplicatedKeyless int64 `json:"duplicated_keyless"`
	// Tables are the counts per table (downstream names), sorted, those
	// with a count only; with [Conflicts.WithSkipped], also the rows Run
	// skipped as already applied.
	Tables []TableConflicts `json:"tables"`
}

// TableConflicts are the Conflicts of one table, and the rows of it that Run
// skipped as already applied (Result.SkippedRows; 0 unless
// [Conflicts.WithSkipped] added them).
type TableConflicts struct {
	Schema            string `json:"schema"`
	Table             string `json:"table"`
	Skipped           int64  `json:"skipped"`
	Replaced          int64  `json:"replaced"`
	DeletesMissed     int64  `json:"deletes_missed"`
	DuplicatedKeyless int64  `json:"duplicated_keyless"`
}

// Zero reports whether c counts nothing (the rows skipped aside).
func (c Conflicts) Zero() bool {
	return c.Replaced == 0 && c.DeletesMissed == 0 && c.DuplicatedKeyless == 0
}

// Add adds the counts of table t.
func (c *Conflicts) Add(t Table, replaced, deletesMissed, duplicatedKeyless int64) {
	if replaced == 0 && deletesMissed == 0 && duplicatedKeyless == 0 {
		return
	}
	c.Replaced += replaced
	c.DeletesMissed += deletesMissed
	c.DuplicatedKeyless += duplicatedKeyless
	tc := c.table(t)
	tc.Replaced += replaced
	tc.DeletesMissed += deletesMissed
	tc.DuplicatedKeyless += duplicatedKeyless
}

// table returns the entry of t in c.Tables, added in order if missing.
func (c *Conflicts) table(t Table) *TableConflicts {
	i, found := slices.BinarySearchFunc(c.Tables, t, func(tc TableConflicts, t Table) int {
		return cmp.Or(strings.Compare(tc.Schema, t.Schema), strings.Compare(tc.Table, t.Name))
	})
	if !found {
		c.Tables = slices.Insert(c.Tables, i, TableConflicts{Schema: t.Schema, Table: t.Name})
	}
	return &c.Tables[i]
}

// Clone returns a copy of c that shares nothing with it.
func (c Conflicts) Clone() Conflicts {
	c.Tables = slices.Clone(c.Tables)
	return c
}

// WithSkipped returns a copy of c with the rows Run skipped per table
// (Result.SkippedRows) in its Tables: what a replay did per table, in one
// report.
func (c Conflicts) WithSkipped(skipped map[Table]int64) Conflicts {
	c = c.Clone()
	for t, n := range skipped {
		if n > 0 {
			c.table(t).Skipped += n
		}
	}
	return c
}

// ConflictReporter is implemented by a sink that counts Conflicts over the
// transactions it committed.
type ConflictReporter interface {
	Conflicts() Conflicts
}

// CommitOrderer is implemented by a sink that must receive row changes in
// commit-ts order across tables: one whose downstream checks foreign keys
// during the apply (SinkOptions.ForeignKeyChecks), where a child written
// before its parent fails. When NeedsCommitOrder reports true, Run uses one
// worker and hands out each commit ts whole before the next: through the
// Tx's [GroupApplier] when it has one (the SQL sinks order the tables by the
// downstream's foreign keys there), else table by table in the order their
// first rows came. This is slower than the parallel default.
type CommitOrderer interface {
	NeedsCommitOrder() bool
}

// TableRows are row changes of one table, in commit-ts order.
type TableRows struct {
	Table Table
	Rows  []*codec.RowChange
}

// GroupApplier is implemented by a Tx that applies the row changes of
// several tables at one commit ts together, in an order of its own choosing
// across the tables: in commit order (see [CommitOrderer]), Run hands it each
// commit ts whole. The same rules as ApplyRows hold for each table's rows.
type GroupApplier interface {
	ApplyGroup(ctx context.Context, groups []TableRows) error
}

// DDLScoper is implemented by a sink that can tell which tables a DDL may
// touch or lock: DDLTables returns them (ok true), and Run then has only the
// workers holding rows of those tables (names compared case-insensitively)
// commit before the DDL runs, while the others keep their transactions open
// across it. ok false means the sink cannot tell, or the DDL may touch
// every table: every worker commits first. A table a DDL locks that is left
// out would wait on a worker's open transaction that only the DDL's end lets
// commit: a DDL in doubt must report ok false. A table whose Schema is empty
// stands for its name in every schema (a downstream that ignores schemas).
type DDLScoper interface {
	DDLTables(ctx context.Context, ddl *codec.DDL) (tables []Table, ok bool, err error)
}

// EventDDLScoper is a DDLScoper whose DDLTables answers from the DDL event
// alone, never from the downstream's catalog, when ScopesFromEvent reports
// true. With one worker, Run then asks it at each DDL, although the DDLs
// read before that one may not have run yet, and hands the worker only the
// rows held of the DDL's tables before it: the other tables' rows stay held
// across the DDL, and go out in larger calls. A DDL whose tables' rows do
// not commute with the other tables' rows (one that reads or writes them,
// or changes what a later statement of another table does) must report ok
// false. The SQLite sink implements it: there every DDL expires every
// prepared statement, and a log with a DDL every few hundred rows otherwise
// handed out a few rows per table, each call's statements prepared anew.
type EventDDLScoper interface {
	DDLScoper
	ScopesFromEvent() bool
}

// DDLTx is implemented by a Tx that can run a DDL inside itself, recording
// mark as the last applied DDL in the same transaction, so that the rows
// before the DDL, the DDL and the rows after it commit (or roll back)
// together: a downstream with transactional DDL and one writer (SQLite).
// When one worker applies everything (TxLimiter 1, no commit order), Run
// hands it DDLs so, and commits every Options.TxnRows rows across them,
// rather than twice at every DDL. Run has begun a Tx of the sink before it
// looks for DDLTx, and looks once; a sink's Txs all implement it or none.
// After a Rollback, the transaction's DDLs never ran: a sink that keeps
// what it read of the schema forgets what they changed.
type DDLTx interface {
	ApplyDDL(ctx context.Context, ddl *codec.DDL, mark DDLMark) error
}

// CommitTsSplitter is implemented by a sink whose transactions take the
// rows of one commit ts of a table in parts, and SplitsCommitTs reports
// true. Run then bounds the memory of the rows it holds by
// Options.SplitBytes whatever the size of an upstream transaction: once the
// commit ts being read took more, it hands out that commit ts's rows that
// it holds, and the rest follow in later ApplyRows calls of the same
// transaction, which commits only once the commit ts is complete (the
// progress never records part of a commit ts). Such a call holds a contiguous run of the table's
// row changes, which the sink applies as the state the calls before it
// left (reordering only within the call, by the rules of Tx.ApplyRows); and
// it keeps nothing of a call's rows past its return: Run reuses their
// memory while the transaction is still open. A transaction that grows past
// Options.TxnRows so keeps no copy to replay: a transient error then fails
// the run ([ErrTooLargeToReplay]), and a rerun resumes.
//
// Not every commit ts may go in parts. A log gives a transaction's changes
// either as each row's final state (TiDB: a pre image is the row before
// the transaction, and the order means nothing) or as every statement's
// change in order (a binlog). Applied in parts, a change meets the state the
// parts before it left: right for the second shape, and for the first as
// long as no change deletes or moves away a key that an earlier change of
// the commit ts wrote (inserted, or moved a row onto) — else it could
// delete the row the transaction wrote there (a swap of two keys, TiDB's
// `UPDATE t SET k = 3 - k`). So Run hands out a table's commit ts in parts
// only while no keyed pre image came after such a write: a bulk load, a
// large DELETE, a large UPDATE that keeps keys, deletes then inserts. Other
// commit ts are held whole; one that turns out so after a part of it went
// out fails the run with [ErrSplitTooLate], having committed none of it. A
// table without a key is a multiset, whose inserts and deletes commute: any
// mix goes in parts. Unless the log flags a unique index on it
// (codec.FlagUniqueKey; one on columns that may be NULL is no key): there
// an insert replaces the row holding its value, and a later part's delete
// of that row would take the inserted one, so each row image counts as a
// key (no delete after an insert, an update being both).
//
// In commit order ([CommitOrderer]) Run hands out every commit ts whole,
// and memory grows with the largest upstream transaction.
//
// The SQL sinks split. A unique value (other than the key) that moves
// between two rows of one commit ts across the parts' boundary meets its
// old row in the first part, which then counts as a conflict
// (Conflicts.Replaced, and the second part's delete of it as
// DeletesMissed); the rows end the same.
type CommitTsSplitter interface {
	SplitsCommitTs() bool
}

// TxLimiter is implemented by a sink that cannot hold more than
// MaxOpenTxs transactions open at once (SQLite has one writer): Run uses at
// most that many workers. 0 means no limit.
type TxLimiter interface {
	MaxOpenTxs() int
}

// Transient wraps err to mark it worth retrying: the operation failed for a
// reason that may pass (connection lost, deadlock, lock wait timeout, busy
// database). A nil err stays nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

// IsTransient reports whether err, or an error it wraps, was marked with
// Transient.
func IsTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// StatementError reports a statement that failed: the table, the commit ts
// range of the rows it held, and the SQL with placeholders (never values).
type StatementError struct {
	Table   Table
	FirstTs uint64 // commit ts of the statement's first row
	LastTs  uint64 // commit ts of its last row
	SQL     string // with placeholders; a multi-row VALUES list is shown once, with its row count
	Err     error
}

func (e *StatementError) Error() string {
	ts := fmt.Sprint(e.FirstTs)
	if e.LastTs != e.FirstTs {
		ts += ".." + fmt.Sprint(e.LastTs)
	}
	return fmt.Sprintf("apply: table %s, commit ts %s: %s: %v", e.Table, ts, e.SQL, e.Err)
}

func (e *StatementError) Unwrap() error { return e.Err }

// DDLError reports a DDL that failed: its schema, commit ts and query, and
// for SQLite the statement it was rewritten to.
type DDLError struct {
	Schema   string
	CommitTs uint64
	Query    string
	Ran      string // the statement run, when it differs from Query
	Err      error
}

func (e *DDLError) Error() string {
	s := fmt.Sprintf("apply: DDL at commit ts %d (schema %q): %q", e.CommitTs, e.Schema, e.Query)
	if e.Ran != "" && e.Ran != e.Query {
		s += fmt.Sprintf(" (run as %q)", e.Ran)
	}
	return s + ": " + e.Err.Error()
}

func (e *DDLError) Unwrap() error { return e.Err }

// ErrUnsupportedDDL is wrapped by the DDLError of a DDL the sink's dialect
// cannot run.
var ErrUnsupportedDDL = errors.New("DDL not supported by this sink")

// ErrAnotherLog is wrapped by the error of a sink whose downstream holds
// another log's progress, unless SinkOptions.AnotherLog allows it.
var ErrAnotherLog = errors.New("apply: the downstream holds another log's progress")

// ErrOrder is wrapped by Run's error when the source delivers an event below
// one already delivered, or a row change after a DDL of the same commit ts.
var ErrOrder = errors.New("apply: source out of commit-ts order")

// ErrTooLargeToReplay is wrapped by Run's error when a transient error lost
// a transaction that held a commit ts split in parts ([CommitTsSplitter])
// and more than Options.TxnRows rows: Run kept no copy of its rows to replay
// it with. Nothing of the transaction committed; running again resumes from
// the recorded progress.
var ErrTooLargeToReplay = errors.New("apply: a transaction too large to replay was lost")

// ErrSplitTooLate is wrapped by Run's error, a [*SplitTooLateError], when a
// commit ts of a table that Run had begun to hand out in parts
// ([CommitTsSplitter]) turned out to be one to apply whole: a change deleted
// or moved a key after changes of the same commit ts wrote keys. Nothing of
// the commit ts is committed; a rerun with it in Options.WholeTs (or with
// Options.SplitBytes above its size) applies it whole.
var ErrSplitTooLate = errors.New("apply: a commit ts handed out in parts must be applied whole")

// SplitTooLateError is the error of [ErrSplitTooLate]: the table and the
// commit ts to apply whole.
type SplitTooLateError struct {
	Table    Table
	CommitTs uint64
}

func (e *SplitTooLateError) Error() string {
	return fmt.Sprintf("%v: the row changes of %s at commit ts %d were handed out in parts, past Options.SplitBytes (--split-mib), and then one deleted or moved a key after others wrote keys: "+
		"in parts, that change could delete a row the transaction wrote; nothing of the commit ts is committed: apply it whole (Options.WholeTs; redokit apply reruns so by itself)",
		ErrSplitTooLate, e.Table, e.CommitTs)
}

// Unwrap makes the error match ErrSplitTooLate.
func (e *SplitTooLateError) Unwrap() error { return ErrSplitTooLate }

// HoldWhole returns the options of the rerun err asks for when it is a
// [*SplitTooLateError]: o with the error's commit ts added to WholeTs, and
// the error. Nothing of that commit ts was committed, and a rerun over the
// sink's progress resumes before it, so each such rerun passes the commit ts
// the one before it failed at. It returns nil for any other error, and when
// o held that commit ts whole already (a rerun would fail the same way).
func HoldWhole(o *Options, err error) (*Options, *SplitTooLateError) {
	var late *SplitTooLateError
	if !errors.As(err, &late) || o != nil && slices.Contains(o.WholeTs, late.CommitTs) {
		return nil, nil
	}
	var again Options
	if o != nil {
		again = *o
	}
	again.WholeTs = append(slices.Clip(again.WholeTs), late.CommitTs)
	return &again, late
}
