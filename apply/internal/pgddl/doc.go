// Package pgddl translates the MySQL DDL of a redo log into PostgreSQL
// statements, for the PostgreSQL sink. Like package sqliteddl it is a
// token-level rewrite, not a parser: it knows the statement forms below and
// fails with an error wrapping apply.ErrUnsupportedDDL, naming the clause or
// token, on anything else, rather than guess. It imports no database driver;
// RewriteWith reads the catalog through a Queryer on the transaction the
// statements then run in (with the DDL's progress row).
//
// # Names
//
// A MySQL database is a PostgreSQL schema; every table is written
// "schema"."table", an unqualified name being in the DDL's schema
// (codec.DDL.Table.Schema). Names are quoted, so their case is kept. A
// name longer than PostgreSQL's 63 bytes is refused (the server would
// truncate it silently), except index names, which are made up:
//
//   - index i of table t is "t.i" (MySQL names indexes per table,
//     PostgreSQL per schema), i lower-cased (MySQL compares index names
//     ignoring case); the primary key is the constraint "t.PRIMARY" (its
//     index has the same name). A name over 63 bytes is cut at a
//     character boundary and ends with "~" and 12 hex digits of the hash of
//     both names; such an index carries "mysql index: i" in its comment.
//   - an unnamed index is named as MySQL does: after its first column, then
//     col_2, col_3…; an unnamed foreign key of a CREATE TABLE as TiDB does:
//     fk_1, fk_2… A foreign key keeps its MySQL name, lower-cased
//     (PostgreSQL's constraint names are per table already), and gets an
//     index named after it unless an index starts with its columns, as TiDB
//     does.
//   - renaming a table renames its indexes (found in pg_index, their MySQL
//     names read back from the "t." prefix or the comment), so that DROP
//     INDEX i ON the new name finds "new.i"; across schemas through a
//     temporary name, then SET SCHEMA.
//
// # Types
//
//	MySQL                                   PostgreSQL
//	TINYINT [UNSIGNED], SMALLINT, BOOL      smallint
//	SMALLINT UNSIGNED, MEDIUMINT [UNSIGNED],
//	INT, INTEGER                            integer
//	INT UNSIGNED, BIGINT                    bigint
//	BIGINT UNSIGNED                         numeric(20,0)
//	BIT(n)                                  bigint (n ≤ 63), numeric(20,0) (n = 64)
//	FLOAT, FLOAT(p ≤ 24)                    real
//	DOUBLE [PRECISION], REAL, FLOAT(p > 24) double precision
//	DECIMAL/NUMERIC/DEC/FIXED(p,s)          numeric(p,s) (DECIMAL alone: (10,0))
//	CHAR(n), VARCHAR(n) (NCHAR, …)          varchar(n) (n characters; CHAR(0) as varchar(1))
//	TINYTEXT … LONGTEXT                     text
//	BINARY, VARBINARY, TINYBLOB … LONGBLOB,
//	a char type with CHARACTER SET binary   bytea
//	DATE                                    date
//	DATETIME(f)                             timestamp(f) without time zone
//	TIMESTAMP(f)                            timestamptz(f) (the session is UTC)
//	TIME(f)                                 interval (MySQL's TIME spans ±838:59:59)
//	YEAR                                    smallint
//	ENUM(…)                                 smallint: the 1-based member number (integer past 32767 members)
//	SET(…)                                  bigint: the bitmap (numeric(20,0) with 64 members)
//	JSON                                    json (keeps the text as given)
//
// UNSIGNED, ZEROFILL, AUTO_INCREMENT, AUTO_RANDOM, CHARACTER SET, COLLATE,
// COMMENT, ON UPDATE CURRENT_TIMESTAMP, VISIBLE/INVISIBLE, a column's
// REFERENCES (which MySQL ignores too), column positions (FIRST, AFTER) and
// all table options (ENGINE, CHARSET, AUTO_INCREMENT, COMMENT, TiDB's…) are
// dropped: the log carries every column's value of every row. An ENUM, SET,
// BIT or YEAR column carries its MySQL type in its comment ("mysql type:
// enum('a','b')"), for a later MODIFY to check.
//
// # Defaults
//
// Literals are translated for the column's type: an ENUM member becomes
// its number, a SET value its bitmap, a bit or hex literal a number or
// bytes, TRUE/FALSE 1/0, a two-digit YEAR 20xx or 19xx, MySQL's string
// escapes decoded. CURRENT_TIMESTAMP[(n)] (NOW(), LOCALTIMESTAMP) is kept.
// A default PostgreSQL cannot give as MySQL does is left out: a zero date
// ('0000-00-00…', or a zero month or day), a TIMESTAMP literal (it is in the
// upstream session's time zone, which the log does not carry), an
// expression (…), a string PostgreSQL text cannot hold. The log's rows carry
// every column, so a default matters only for the rows a column is added to:
// ADD COLUMN with such a default, or with CURRENT_TIMESTAMP (the rows got
// the upstream's time of the DDL), fails when the table has rows (a check
// run with the statements). ADD COLUMN … NOT NULL without a DEFAULT gives
// the rows MySQL's implicit default (0, the empty string, the first ENUM member, the
// empty SET), or fails the same way for the types whose implicit default
// PostgreSQL has no value for (dates, JSON, BINARY(n)).
//
// # Statements
//
//   - CREATE DATABASE|SCHEMA → CREATE SCHEMA IF NOT EXISTS; DROP
//     DATABASE|SCHEMA → DROP SCHEMA IF EXISTS … CASCADE; ALTER DATABASE
//     with character set or collation options only → nothing.
//   - CREATE TABLE [IF NOT EXISTS] t (…) → CREATE TABLE IF NOT EXISTS with
//     the columns and the primary key, then CREATE [UNIQUE] INDEX IF NOT
//     EXISTS for each key, then each FOREIGN KEY … REFERENCES … [ON DELETE|ON
//     UPDATE CASCADE|RESTRICT|SET NULL|SET DEFAULT|NO ACTION] as ALTER TABLE
//     ADD CONSTRAINT … NOT VALID unless the constraint is there (MATCH is
//     dropped). NOT VALID: the rows there are not checked, as MySQL does not
//     with foreign_key_checks off (the apply's default); the log holds the
//     rows the upstream accepted. CHECK
//     constraints are dropped: a check can only refuse a row, and the log
//     holds the rows the upstream accepted (TiDB ignores them by default).
//     Prefix lengths of key parts are dropped.
//   - CREATE TABLE t LIKE u → CREATE TABLE IF NOT EXISTS t (LIKE u
//     INCLUDING DEFAULTS INCLUDING COMMENTS) and u's indexes under t's
//     names (RewriteWith).
//   - DROP TABLE|VIEW [IF EXISTS] a, b → DROP TABLE|VIEW IF EXISTS a, b;
//     TRUNCATE [TABLE] t → TRUNCATE TABLE t (which fails when another
//     table's foreign key references t).
//   - RENAME TABLE a TO b[, c TO d], ALTER TABLE a RENAME [TO|AS] b, within
//     or across schemas, with the indexes (RewriteWith). A rename whose
//     source is gone and target there was applied already: nothing.
//   - ALTER TABLE t with, comma-separated: ADD [COLUMN] def | (defs) [IF
//     NOT EXISTS], DROP [COLUMN] c, MODIFY [COLUMN] def, CHANGE [COLUMN] old
//     def, ALTER [COLUMN] c SET DEFAULT v|DROP DEFAULT, RENAME COLUMN a TO
//     b, RENAME INDEX|KEY a TO b, ADD [UNIQUE] INDEX|KEY, ADD [CONSTRAINT
//     [s]] PRIMARY KEY|UNIQUE|FOREIGN KEY, DROP PRIMARY KEY, DROP INDEX|KEY
//     i, DROP FOREIGN KEY f, ALTER INDEX i [IN]VISIBLE (nothing), DROP CHECK
//     (nothing), table options (nothing).
//   - MODIFY and CHANGE (RewriteWith) replace the definition: type, NULL,
//     DEFAULT. The type changes only where PostgreSQL converts the values as
//     MySQL does: between integer and decimal types (and to float or
//     string), float to float, string to string, string to bytea
//     (convert_to UTF8) and back, string to a number, DATE to DATETIME, a
//     date/time type to itself, BIT to numbers, an ENUM or SET to one with
//     members appended (the numbers keep their meaning). Anything else (an
//     ENUM reordered, a float or a date made a string…) is unsupported.
//   - CREATE [UNIQUE] INDEX i ON t (cols) → CREATE [UNIQUE] INDEX IF NOT
//     EXISTS "t.i"; DROP INDEX i ON t → DROP INDEX IF EXISTS "s"."t.i".
//   - CREATE [OR REPLACE] VIEW and ALTER VIEW (ALGORITHM, DEFINER, SQL
//     SECURITY, WITH CHECK OPTION dropped) → CREATE OR REPLACE VIEW, when the
//     body is a SELECT of names, numbers, plain strings, comparisons, joins
//     and COUNT/SUM/MIN/MAX/AVG: names are quoted, unqualified tables get
//     the DDL's schema. Any other body is unsupported. (String comparisons
//     follow PostgreSQL's collation, not MySQL's; ENUM columns read as
//     numbers.)
//
// # Replays and checks
//
// PostgreSQL aborts the transaction of a failed statement, with the DDL's
// progress row in it, so "already applied" cannot be told by the error:
// the statements are idempotent instead (IF [NOT] EXISTS, or a DO block
// that looks first), so that a DDL the downstream already has is a no-op.
//
// Dropping an index, a primary key or a foreign key that is not there
// while its table is, is an error naming both (a DO block raises it),
// unless the DDL said IF EXISTS: a DDL and its progress row commit
// together, so the apply never runs a DROP INDEX twice, and a missing
// index means the names no longer follow the tables — the bug that let a
// DROP INDEX after a RENAME TABLE pass as applied while the index stayed
// and later turned an upsert into a delete — or a downstream changed by
// hand. Either way, not something to step over.
//
// The checks' errors carry SQLSTATE 42704 (undefined_object: an index or
// constraint to drop), 42703 (undefined_column: a column in another case)
// or 0A000 (feature_not_supported: an added column's value for the rows
// there), and a message starting "redokit: " that names the object.
//
// # Unsupported
//
// Partitioning (PARTITION BY, ADD/DROP/… PARTITION), generated columns,
// spatial types and indexes, FULLTEXT, functional key parts, SERIAL,
// temporary tables, CREATE TABLE … SELECT, ALTER TABLE … RENAME with other
// clauses, DROP CONSTRAINT, ADD FOREIGN KEY without a name in ALTER TABLE
// (TiDB's generated name depends on the table's history), CONVERT TO
// CHARACTER SET binary, views beyond the above, triggers, procedures,
// functions, events, and any statement not listed.
//
// Case: TiDB compares table and column names ignoring case, PostgreSQL's
// quoted names do not. A table the query spells in another case than the
// DDL's table list (codec.DDL.Table and Tables, which name tables as TiDB
// keeps them, like the row events) is written as the list spells it. A
// column spelled in another case than the downstream's makes the statement
// fail (DROP COLUMN checks first, so that it is not taken for "already
// dropped").
//
// Replays that cannot be told apart, as in MySQL: an ADD INDEX without a
// name adds one more index (c_2, c_3…), a RENAME TABLE that swaps names
// swaps them back.
//
// Known gaps: dropping a column that is part of a multi-column index drops
// the index in PostgreSQL, where MySQL narrows it (a later DROP INDEX of it
// then fails); tables the query names outside the DDL's table list keep the case
// the query spells.
package pgddl
