// Package codec is redokit's event model and its binary encoding: what one
// record of a redo log holds, and the bytes it is stored as. The segment
// package frames, checksums and compresses these bytes; this package only
// turns one [Event] into bytes and back.
//
// # Model
//
// An [Event] is a [RowChange] or a [DDL]. A row change carries its start and
// commit ts, its table ([TableName]: schema, name, physical table ID, whether
// that ID is a partition) and complete row images: Columns (the post image)
// for an insert, PreColumns (the pre image) for a delete, both for an update
// ([RowChange.Op] says which). A [Column] has a name, a MySQL type code
// ([Type]), [ColumnFlag]s, a charset and collation where they apply, and a
// [Value]. A DDL carries its ts, the table it names, TiDB's action type
// ([ActionType]), the query, and every table it touches with its
// [TableRole]: affected, created or dropped — the DDL barrier needs the
// created ones.
//
// A Value is a small struct, not an interface: a [Kind] and either 64 bits
// (integers, float bit patterns, packed dates) or a byte payload (decimal,
// string, bytes, JSON text). NULL, the empty string and the empty byte
// string are three different values; floats keep their exact bit pattern.
//
// # Encoding
//
// All multi-byte fixed-width integers are little-endian. uvarint is
// encoding/binary's unsigned varint (at most 10 bytes); varint is its zigzag
// signed form. str is a uvarint length followed by that many bytes (names
// and text are not checked for UTF-8: they round-trip as bytes).
//
//	event     := version:u8 kind:u8 commit_ts:u64 start_delta:uvarint body
//	             start_ts = commit_ts - start_delta (mod 2^64)
//	body      := row (kind 1) | ddl (kind 2)
//	row       := table n_cols:uvarint n_pre:uvarint column*n_cols column*n_pre
//	ddl       := table action:u8 query:str n_tables:uvarint (table role:u8)*n_tables
//	table     := schema:str name:str physical_id:varint tflags:u8
//	             tflags bit 0: is partition; bits 1-7 zero
//	column    := name:str type:u8 flags:u8 tag:u8 [charset:str] [collation:str] value
//	             tag bits 0-4: value kind; bit 5: a non-empty charset
//	             follows; bit 6: a non-empty collation follows; bit 7 zero.
//	             An absent charset or collation is the empty string; a
//	             present one that is empty is malformed.
//
// The payload by value kind:
//
//	0  null       nothing
//	1  int        varint
//	2  uint       uvarint
//	3  float32    u32, the IEEE 754 bits
//	4  float64    u64, the IEEE 754 bits
//	5  decimal    str, the exact decimal text ("-12.3400")
//	6  string     str
//	7  bytes      str
//	8  date       u64, packed DateTime (time fields and fsp zero)
//	9  datetime   u64, packed DateTime
//	10 timestamp  u64, packed DateTime (no zone recorded)
//	11 duration   varint of micros<<3 | fsp  (MySQL TIME, ±838:59:59)
//	12 year       uvarint, at most 65535
//	13 bit        uvarint
//	14 enum       uvarint, the 1-based member index
//	15 set        uvarint, the member bitmap
//	16 json       str, the JSON text
//
// A packed [DateTime] holds, from bit 0 up: fsp 3 bits, microsecond 20,
// second 6, minute 6, hour 5, day 5, month 4, year 14; bit 63 is zero. This is
// exact for every MySQL value including zero dates, and packed values of one
// fsp order like the times they hold. Only values a MySQL column holds are
// valid ([DateTime.Valid], [Duration.Valid]): fsp at most 6, no fraction
// digit beyond fsp, each field within MySQL's range (month 13, hour 24,
// second 60 are malformed), so that the text form, which prints fsp digits,
// is exact.
//
// The commit ts sits at the fixed offset 2 so that [PeekCommitTs] can read
// it without decoding; the start ts is stored as its distance below the
// commit ts because real TSO pairs are close (3–5 bytes instead of 8).
// Every list is preceded by its count, so a decoder checks each count and
// length against the bytes left before it allocates.
//
// # Versions
//
// A segment record's kind and commit ts must equal its event's
// ([CheckRecord] checks the 10-byte header against them).
//
// The first byte of every event is the format version, [Version] (1). A
// change to anything above is a new version; a reader that meets a version it
// does not know fails with [ErrUnknownVersion], naming the version, and reads
// nothing further — the bytes after the version byte mean whatever that
// version says. Within version 1 every reserved bit and every unknown code
// (event kind, value kind, table role) is an error ([ErrMalformed]), so that
// they stay free for later versions; unknown [Type] and [ActionType] codes
// are not, as they are MySQL's and TiDB's to extend, and pass through.
//
// # Errors
//
// [DecodeEvent] returns a [*DecodeError] naming the field
// ("pre_columns[2].value", "n_pre") that failed and the offset of its first
// byte (a count's, whatever its entries lack), and wrapping exactly one of
// [ErrUnknownVersion], [ErrTruncated] (the input ends inside a field, or a
// length or count exceeds what is left) or [ErrMalformed]. It never panics
// and allocates at most a fixed multiple of its input's size.
//
// [AppendEvent] cannot fail, so it encodes whatever an Event holds; a writer
// calls [CheckEvent] first, which rejects what DecodeEvent would (a value
// built from an invalid DateTime, an unknown table role), so that no
// acknowledged event is unreadable; [CheckedLen] does that check and sizes
// the encoding in one pass, for a writer that encodes in place.
//
// # Memory
//
// [AppendEvent] appends to a caller's buffer and allocates nothing once the
// buffer is large enough. [DecodeEvent] decodes into a caller's Event and
// reuses its column slices, strings that repeat (names, charsets) and a
// private copy of the input that byte payloads point into: decoding a stream
// into one Event allocates nothing in the steady state, also when the events
// of a few tables alternate (an Event remembers its last table names). What
// it decoded is therefore only valid until the next DecodeEvent into the same
// Event; [Event.Clone] keeps one.
//
// A [Decoder] is for decoding a stream into many Events (a reader's pool of
// them): it remembers each table's column definitions, so that a column whose
// definition is the same bytes as before is not parsed again and shares its
// strings with every earlier event, and with Decoder.Alias the byte payloads
// point into the input instead of a copy. [Decoder.Check] gives a decode's
// verdict (its very error) and an event's kind and commit ts without building
// the event: a row of a table it knows is only scanned.
//
// docs/FORMAT.md in the repository has the same specification with a worked
// example in hex.
package codec
