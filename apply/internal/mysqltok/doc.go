// Package mysqltok splits the MySQL DDL text of a redo log into tokens, for
// the packages that rewrite that DDL for another database (sqliteddl,
// pgddl). It is a tokenizer, not a parser: it knows quoting and comments,
// and nothing of statements; its callers match the statement forms they
// know over the tokens and refuse the rest.
//
// The rules, which are MySQL's as far as a DDL needs them:
//
//   - A run of spaces, tabs, CRs and LFs is one Space token, its text kept.
//   - A comment is one Space token whose text is " ": "#" or "-- " (two
//     dashes and a space) to the end of the line (the line feed is a Space
//     token of its own), and "/*" to the next "*/". The comments whose text
//     MySQL or TiDB run, /*!50100 … */ and TiDB's /*T![feature] … */, are
//     comments here too: what is inside them is dropped. A "/*" with no "*/"
//     is an error.
//   - 'text' and "text" are String tokens (a double-quoted text is a string,
//     as under MySQL's and TiDB's default sql_mode, which the DDL of a CDC
//     log is written in), and `text` is an Ident token; Unquote decodes a
//     String. A token's Text keeps its quotes and its escapes as
//     written: a doubled quote character stays inside, and so, between
//     single or double quotes but not between backquotes, does a backslash
//     with the byte after it. A quote with no closing quote is an error.
//   - A run of letters, digits, '_', '$' and bytes of 0x80 and above (so
//     any UTF-8 letter) is a Word: a keyword, a bare name or a number. A
//     number with a point is three tokens: 1.50 is "1", ".", "50".
//   - Any other byte is a Punct token of its own.
//
// Joining the Text of every token gives back the input, but for comments,
// which become a space.
package mysqltok
