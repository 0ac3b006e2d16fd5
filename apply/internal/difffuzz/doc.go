// Package difffuzz is the model-based differential fuzzer of package apply:
// it generates random but legal CDC histories, keeps a model of what a
// MySQL upstream holds after each, and compares what each SQL sink holds
// after applying the history with the model. Its test,
// TestApplyDifferential, is the fuzzer; this package is its generator,
// model and comparison.
//
// # Histories
//
// A History is a list of Steps, each a kind and a seed. Build interprets
// the steps in order against the model as it stands, drawing every choice
// from the step's own seed, so that any subset of a history's steps is a
// legal history too: a step that finds nothing to act on does nothing. The
// shrinker relies on it (it drops steps while the divergence stays), and
// a seed names a history and its shrinking both.
//
// The steps: CREATE TABLE (a primary key of one or two columns, a unique
// NOT NULL handle key, no key, a tree: an id and a parent referencing it
// by a foreign key, or a child whose pid references a tree's id), with
// columns of every codec type — signed and
// unsigned integers of each width, FLOAT, DOUBLE, DECIMAL, CHAR, VARCHAR
// (binary and case-insensitive collations), TEXT, VARBINARY, BLOB, DATE,
// DATETIME, TIMESTAMP, TIME, YEAR, BIT, ENUM, SET, JSON — and unique and
// plain indexes, multi-column ones too; ADD COLUMN (with a DEFAULT
// sometimes, which MySQL fills the rows there with), DROP COLUMN (of an
// indexed column too), MODIFY and CHANGE COLUMN to a type that holds every
// value (an INT becoming a VARCHAR, a FLOAT a DOUBLE, a DATE a DATETIME,
// …), RENAME COLUMN, CREATE and DROP INDEX (unique ones only where the rows
// allow; dropping a handle key's leaves the table without a key), one
// ALTER TABLE of several such clauses, RENAME TABLE, TRUNCATE, DROP TABLE,
// and a table dropped and made again under its name (never a tree a child
// references). DDLs come at a commit ts of their own, after the
// rows of the one before, or beside another DDL.
//
// A transaction step changes one or two tables at one commit ts, in one of
// the two shapes a log has (package apply, "Ordering"): each row's final
// state, one change per row, shuffled; or each statement's change in the
// order it ran, a row changing several times, a key swap going through a
// spare key. Its changes: inserts, updates of any columns and of the key,
// deletes, keys swapped between rows, unique values moving from one row to
// another, a tree's parent taking a new id with its children following,
// identical rows in a table without a key; a big transaction inserts
// hundreds of rows at one commit ts; a child table is often written in one
// transaction with its tree. Each change keeps every unique index (with
// PAD SPACE, and case-insensitively where the collation is: key values
// differ in case and trailing spaces too) and, when the history applies
// with the foreign-key checks on, every parent a tree or a child refers to
// (at each change for a tree, at the transaction's end across tables).
//
// A quarter of the histories (none with the foreign-key checks on) end with
// a replay over a downstream that ran ahead: the downstream's own sink
// applied the log up to one mark, the replay starts at an earlier one, with
// no DDL from there on (a downstream that ran past a DDL meets its rows in
// their old shape: no case apply serves). A replay cannot tell identical
// rows of a table without a key apart (documented), so from the first mark
// on such tables' rows are all distinct. Other histories are applied in
// two runs a third of the time, the second resuming over the first's
// progress. A third of the histories apply with apply.Options.SplitBytes
// under 16 KiB, so that their transactions go to the sink in parts
// (apply.CommitTsSplitter); a run that fails as split too late
// (apply.ErrSplitTooLate, loud and named) is followed by one over its
// progress that holds that commit ts whole (apply.Options.WholeTs) and
// splits the others, as redokit apply does, until one passes, and the runs
// must end as one run would.
//
// # The comparison
//
// Every table of the model must exist downstream with exactly its columns
// (and no other table but the progress tables), and hold exactly its rows,
// as multisets. Want gives a model table's rows as sink d must hold them
// (MariaDB stores a -0 float as 0: documented); SelectExpr and Canon read
// a sink's values back to the same text, canonicalizing only what sinks
// print differently for one value (a float's digits, the fraction digits
// of a time, the case of hex). After a replay over a downstream that ran
// ahead, a table without a key may hold more rows than the model, as many
// as the sink counted in Conflicts.DuplicatedKeyless for it (documented),
// but none fewer.
//
// A documented refusal must be loud and named: a NUL in PostgreSQL text
// (a StatementError naming a table the history wrote a NUL into), a column
// type change on SQLite (a DDLError of apply.ErrUnsupportedDDL naming the
// MODIFY or CHANGE COLUMN; the SQLite histories keep their type changes one
// time in eight), and with the foreign-key checks on a unique value moving
// in a table a foreign key references (every sink), or a tree's keys
// moving inside one transaction (PostgreSQL, 23503). Any other error, and
// any difference, is a divergence.
package difffuzz
