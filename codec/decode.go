package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"unsafe"
)

// Sentinel errors. Every error DecodeEvent and PeekCommitTs return is a
// *DecodeError that matches exactly one of them with errors.Is.
var (
	// ErrUnknownVersion: the first byte is a format version this reader does
	// not know. Nothing after it was looked at.
	ErrUnknownVersion = errors.New("unknown event format version")
	// ErrTruncated: the input ended inside a field, or a length or count
	// asks for more bytes than are left.
	ErrTruncated = errors.New("truncated event")
	// ErrMalformed: a field holds a value the format does not allow (an
	// unknown kind, a reserved bit, an over-long varint, bytes after the end).
	ErrMalformed = errors.New("malformed event")
)

// DecodeError describes why an encoded event could not be decoded.
type DecodeError struct {
	Offset int    // byte offset into the input where the bad field starts
	Field  string // the field being decoded, e.g. "version", "pre_columns[2].value"
	Err    error  // wraps ErrUnknownVersion, ErrTruncated or ErrMalformed, with detail
}

func (e *DecodeError) Error() string {
	return "codec: decode event: " + e.Field + " at offset " + strconv.Itoa(e.Offset) + ": " + e.Err.Error()
}

// Unwrap returns the detailed error, which wraps the sentinel.
func (e *DecodeError) Unwrap() error { return e.Err }

// IsUnknownVersion reports whether err says an event has an unknown format version.
func IsUnknownVersion(err error) bool { return errors.Is(err, ErrUnknownVersion) }

// IsCorrupt reports whether err says an event is truncated or malformed.
func IsCorrupt(err error) bool { return errors.Is(err, ErrTruncated) || errors.Is(err, ErrMalformed) }

// PeekCommitTs returns the commit ts of an encoded event without decoding
// the rest: it sits at a fixed offset so that segment writers and readers can
// index events cheaply. It checks the version and the event kind.
func PeekCommitTs(src []byte) (uint64, error) {
	if err := checkHeader(src); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(src[2:headerLen]), nil
}

func checkHeader(src []byte) error {
	switch {
	case len(src) == 0:
		return &DecodeError{0, "version", fmt.Errorf("%w: empty input", ErrTruncated)}
	case src[0] != Version:
		return &DecodeError{0, "version", fmt.Errorf("%w %d (this reader knows version %d)",
			ErrUnknownVersion, src[0], Version)}
	case len(src) < 2:
		return &DecodeError{1, "kind", fmt.Errorf("%w: input ends before it", ErrTruncated)}
	case src[1] != byte(RowEvent) && src[1] != byte(DDLEvent):
		return &DecodeError{1, "kind", fmt.Errorf("%w: unknown event kind %d", ErrMalformed, src[1])}
	case len(src) < headerLen:
		return &DecodeError{2, "commit_ts", fmt.Errorf("%w: needs 8 bytes, %d left", ErrTruncated, len(src)-2)}
	}
	return nil
}

// DecodeEvent decodes the event that is the whole of src into ev, reusing
// ev's memory. It fails with a *DecodeError if src is anything but exactly
// one valid event; it never panics, and whatever src claims it allocates at
// most a fixed multiple of len(src).
//
// Decoding into the same Event again and again allocates nothing once its
// slices have grown, as long as names repeat: strings (names, charsets, the
// query) are reused when they equal the previous event's at the same place.
//
// The byte payloads of the decoded values (Value.Bytes) do not alias src:
// they point into a copy that ev owns and that the next DecodeEvent into ev
// overwrites, like ev's column slices. Clone an event to keep it. On error ev
// holds a partial event; decode into it again or discard it.
func DecodeEvent(src []byte, ev *Event) error {
	return decodeEvent(src, ev, nil)
}

// Decoder decodes events as DecodeEvent does, and remembers what the events
// it decoded have in common: their tables, and for each table the encoded
// definitions of its columns (name, type, flags, charset, collation). A column
// whose definition has the bytes of the same column of the table's previous
// event is not parsed again: its fields, strings included, are the remembered
// ones, and only its value is decoded. Events of a few tables, decoded into
// many Events (a pool of reused events, say), then share their strings, cost
// no allocation and touch little memory besides the events themselves.
//
// The strings of remembered definitions are interned, so that tables with
// the same column names share them too. A column of a reused Event that
// already holds a definition's strings is not written again, only its value.
//
// What a Decoder remembers is bounded: it forgets everything when it has seen
// 1,024 tables (maxDecoderTables), and interns at most 4,096 strings at once. The zero Decoder is ready to use. A Decoder is not
// safe for concurrent use; the Events it decodes into may be used anywhere.
type Decoder struct {
	// Alias makes the byte payloads of decoded values (Value.Bytes) point
	// into src instead of into a copy the Event owns: decoding copies
	// nothing, and src must then stay unchanged for as long as the event is
	// used. For callers that hold src for the event's life anyway.
	Alias bool

	tables map[string]*tableCache
	// recent caches tables by a cheap hash of their encoded names (their
	// length and last byte), before the map: the few tables of a stream
	// are found with one comparison.
	recent [16]*tableCache
	// strs interns the strings of the column definitions of tables.
	strs map[string]string
	// spare is what Check decodes into when it cannot only scan.
	spare *Event
}

// intern returns the string equal to s that the Decoder's column definitions
// share, so that the columns of tables with the same names, charsets and
// collations hold the same strings.
func (x *Decoder) intern(s string) string {
	if s == "" {
		return ""
	}
	if t, ok := x.strs[s]; ok {
		return t
	}
	if x.strs == nil || len(x.strs) >= maxInterned {
		x.strs = make(map[string]string)
	}
	x.strs[s] = s
	return s
}

// maxInterned bounds the strings a Decoder interns: past it, it starts
// again (what it interned stays shared where it is used).
const maxInterned = 4096

// maxDecoderTables bounds the tables a Decoder remembers.
const maxDecoderTables = 1024

// tableCache is what a Decoder remembers of one table (a schema and a name).
type tableCache struct {
	key          string // the encoded schema and name
	schema, name string // substrings of key
	cols         []colCache
}

// colCache is one column's encoded definition and what it decodes to. The
// value kind in the tag byte is not part of the definition: it changes from
// event to event as a column is NULL or not. def holds the tag of the last
// match, so that a column whose kind does not change is checked with one
// comparison.
type colCache struct {
	def   []byte // the encoding from the name to the value payload
	tagAt int    // where the tag is in def: after the name, type and flags
	col   Column // the definition's fields; Value is zero
}

// match reports whether the column definition at b[off:] is cc's, and where
// it ends, and its value kind.
func (cc *colCache) match(b []byte, off int) (end int, kind Kind, ok bool) {
	end = off + len(cc.def)
	if end > len(b) {
		return 0, 0, false
	}
	if string(b[off:end]) == string(cc.def) {
		return end, Kind(cc.def[cc.tagAt] & tagKindMask), true
	}
	// The same but for the kind?
	t := off + cc.tagAt
	tag := b[t]
	kind = Kind(tag & tagKindMask)
	if (tag^cc.def[cc.tagAt])&^tagKindMask != 0 || kind > maxKind ||
		string(b[off:t]) != string(cc.def[:cc.tagAt]) || string(b[t+1:end]) != string(cc.def[cc.tagAt+1:]) {
		return 0, 0, false
	}
	cc.def[cc.tagAt] = tag
	return end, kind, true
}

// Check reports whether src is exactly one valid event, with exactly the
// error Decode would return, and returns its kind and commit ts, without
// building the event: a writer that stores encodings it was given checks
// them so. A row event of a table whose column definitions d remembers, with
// values plainly well formed, is only scanned; anything else (the first
// events of a table, DDLs, every invalid input) is decoded into an Event d
// keeps for that, so that the verdict and its error are Decode's own.
func (d *Decoder) Check(src []byte) (EventKind, uint64, error) {
	if len(src) >= headerLen && src[0] == Version && src[1] == byte(RowEvent) && len(d.tables) > 0 {
		c := decoder{b: src, off: headerLen, x: d}
		c.uvarint(fStartTs)
		var t TableName
		tc := c.cachedTable(&t)
		nCols := c.count(fColumnCount, minColumnLen, 0)
		nPre := c.count(fPreColumnCount, minColumnLen, nCols)
		if c.err == nil && c.knownColumns(nil, nCols, tc) == nCols && c.knownColumns(nil, nPre, tc) == nPre &&
			c.off == len(src) {
			return RowEvent, binary.LittleEndian.Uint64(src[2:headerLen]), nil
		}
	}
	if d.spare == nil {
		d.spare = new(Event)
	}
	err := d.Decode(src, d.spare)
	kind, ts := d.spare.Kind, d.spare.CommitTs()
	// With Alias the spare's values point into src, which is the caller's
	// to reuse or let go.
	for _, cols := range [2][]Column{d.spare.Row.Columns, d.spare.Row.PreColumns} {
		for i := range cols {
			cols[i].Value = Value{}
		}
	}
	if err != nil {
		return 0, 0, err
	}
	return kind, ts, nil
}

// Decode decodes the event that is the whole of src into ev, reusing ev's
// memory, exactly as DecodeEvent does (the same result, the same errors), but
// with the strings and column definitions d remembers (see Decoder). With
// Alias, ev's byte payloads alias src.
func (d *Decoder) Decode(src []byte, ev *Event) error {
	return decodeEvent(src, ev, d)
}

func decodeEvent(src []byte, ev *Event, x *Decoder) error {
	if len(src) < headerLen || src[0] != Version || src[1] != byte(RowEvent) && src[1] != byte(DDLEvent) {
		if err := checkHeader(src); err != nil {
			return err
		}
	}
	d := decoder{off: headerLen, x: x, names: &ev.names}
	kind := EventKind(src[1])
	commitTs := binary.LittleEndian.Uint64(src[2:headerLen])
	ev.Kind = kind
	if kind == RowEvent {
		if x != nil && x.Alias {
			d.b = src
		} else {
			// Value payloads are cut from a private copy so that a
			// caller who recycles src cannot change a decoded event.
			ev.buf = append(ev.buf[:0], src...)
			d.b = ev.buf
		}
		ev.DDL = DDL{Tables: ev.DDL.Tables[:0]}
		d.decodeRow(&ev.Row, commitTs)
	} else {
		d.b = src
		ev.Row = RowChange{Columns: ev.Row.Columns[:0], PreColumns: ev.Row.PreColumns[:0]}
		d.decodeDDL(&ev.DDL, commitTs)
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail(fEnd, d.off, ErrMalformed, "%d bytes after the end of the event", len(d.b)-d.off)
	}
	if d.err != nil {
		return d.err
	}
	return nil
}

// Fields, for error messages.
type field uint8

const (
	fStartTs field = iota
	fSchema
	fTableName
	fPhysicalID
	fTableFlags
	fColumnCount
	fPreColumnCount
	fName
	fType
	fFlags
	fTag
	fCharset
	fCollation
	fValue
	fDDLType
	fQuery
	fTableCount
	fRole
	fEnd
)

// The names are docs/FORMAT.md's. A table's fields are prefixed with
// "table." in the event's own table and with "tables[i]." in a DDL's list.
var fieldNames = [...]string{"start_delta", "schema", "name", "physical_id", "tflags", "n_cols",
	"n_pre", "name", "type", "flags", "tag", "charset", "collation", "value", "action",
	"query", "n_tables", "role", "end"}

func (f field) isTable() bool { return f >= fSchema && f <= fTableFlags }

// Where a field sits, for error messages.
const (
	inHeader = iota
	inColumns
	inPreColumns
	inTables
)

var sectionNames = [...]string{"", "columns", "pre_columns", "tables"}

// decoder reads one event. Errors are sticky: the first one is kept, and
// every read after it returns zero values, so callers check d.err only where
// it saves work (once per column).
type decoder struct {
	b       []byte
	off     int
	err     *DecodeError
	section uint8
	index   int
	x       *Decoder   // nil for DecodeEvent
	names   **nameRing // the Event's table names
}

func (d *decoder) fail(f field, off int, sentinel error, format string, args ...any) {
	if d.err != nil {
		return
	}
	name := fieldNames[f]
	if d.section != inHeader {
		name = sectionNames[d.section] + "[" + strconv.Itoa(d.index) + "]." + name
	} else if f.isTable() {
		name = "table." + name
	}
	d.err = &DecodeError{Offset: off, Field: name, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
	d.off = len(d.b) // every later read fails fast
}

func (d *decoder) byte1(f field) byte {
	if d.off >= len(d.b) {
		d.fail(f, d.off, ErrTruncated, "input ends before it")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

// uvarint is small enough to inline; most varints here are one byte.
func (d *decoder) uvarint(f field) uint64 {
	if off := d.off; off < len(d.b) && d.b[off] < 0x80 {
		d.off = off + 1
		return uint64(d.b[off])
	}
	return d.uvarintSlow(f)
}

func (d *decoder) uvarintSlow(f field) uint64 {
	// Two bytes (a start delta, a table ID) are common enough for a path
	// of their own.
	if off := d.off; len(d.b)-off >= 2 && d.b[off] >= 0x80 && d.b[off+1] < 0x80 {
		d.off = off + 2
		return uint64(d.b[off]&0x7f) | uint64(d.b[off+1])<<7
	}
	// Up to 8 bytes at once: a varint of at most 8 bytes, when 8 bytes are
	// left, is gathered from one load.
	if off := d.off; len(d.b)-off >= 8 {
		x := binary.LittleEndian.Uint64(d.b[off:])
		if stop := ^x & 0x8080808080808080; stop != 0 {
			n := bits.TrailingZeros64(stop)/8 + 1
			x &= 0x7f7f7f7f7f7f7f7f >> (64 - 8*n)
			d.off = off + n
			return x&0x7f | x>>1&(0x7f<<7) | x>>2&(0x7f<<14) | x>>3&(0x7f<<21) |
				x>>4&(0x7f<<28) | x>>5&(0x7f<<35) | x>>6&(0x7f<<42) | x>>7&(0x7f<<49)
		}
	}
	var v uint64
	for i, shift := d.off, uint(0); i < len(d.b); i, shift = i+1, shift+7 {
		c := d.b[i]
		if shift == 63 && c > 1 {
			d.fail(f, d.off, ErrMalformed, "varint overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			d.off = i + 1
			return v
		}
	}
	d.fail(f, d.off, ErrTruncated, "input ends inside a varint")
	return 0
}

func (d *decoder) varint(f field) int64 {
	u := d.uvarint(f)
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decoder) fixed32(f field) uint32 {
	if len(d.b)-d.off < 4 {
		d.fail(f, d.off, ErrTruncated, "needs 4 bytes, %d left", len(d.b)-d.off)
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) fixed64(f field) uint64 {
	if len(d.b)-d.off < 8 {
		d.fail(f, d.off, ErrTruncated, "needs 8 bytes, %d left", len(d.b)-d.off)
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

// bytes returns the next length-prefixed byte string as a subslice of d.b,
// capped so that appending to it cannot overwrite what follows.
func (d *decoder) bytes(f field) []byte {
	// Fast path, inlined: a one-byte length that fits.
	if off := d.off; off < len(d.b) {
		if n := int(d.b[off]); n < 0x80 && n < len(d.b)-off {
			end := off + 1 + n
			d.off = end
			return d.b[off+1 : end : end]
		}
	}
	return d.bytesSlow(f)
}

func (d *decoder) bytesSlow(f field) []byte {
	start := d.off
	n := d.uvarint(f)
	if n > uint64(len(d.b)-d.off) {
		d.fail(f, start, ErrTruncated, "length %d, %d bytes left", n, len(d.b)-d.off)
		return nil
	}
	// After a failed read d.off == len(d.b) and n == 0: an empty slice.
	end := d.off + int(n)
	s := d.b[d.off:end:end]
	d.off = end
	return s
}

// str sets *dst to the next length-prefixed string, keeping the string it
// already holds when they are equal (the comparison does not allocate).
// flaggedStr reads into dst the string a tag bit announces (set), which must
// not be empty, or clears dst; it reports false after a failure.
func (d *decoder) flaggedStr(set bool, f field, dst *string, bit, name string) bool {
	if !set {
		*dst = ""
		return true
	}
	off := d.off
	d.str(f, dst)
	if *dst == "" {
		d.fail(f, off, ErrMalformed, "tag %s is set and the %s is empty", bit, name)
		return false
	}
	return true
}

func (d *decoder) str(f field, dst *string) {
	b := d.bytes(f)
	if *dst != string(b) {
		*dst = string(b)
	}
}

// count reads a list length and checks that the rest of the input could hold
// that many entries, plus before entries counted already, of at least min
// bytes each, which bounds what the caller allocates by the input's size.
// Its error names the count, at the count's first byte.
func (d *decoder) count(f field, min, before int) int {
	start := d.off
	n := d.uvarint(f)
	if d.err != nil {
		return 0
	}
	// n ≤ len(d.b) first, so that (n+before)*min cannot overflow (and no
	// division); before already passed this check.
	if left := uint64(len(d.b) - d.off); n > uint64(len(d.b)) || (n+uint64(before))*uint64(min) > left {
		if before > 0 {
			d.fail(f, start, ErrTruncated, "%d entries and %d before them need at least %d bytes each, %d bytes left",
				n, before, min, left)
		} else {
			d.fail(f, start, ErrTruncated, "%d entries need at least %d bytes each, %d bytes left", n, min, left)
		}
		return 0
	}
	return int(n)
}

// name is str for table and schema names: a name that differs from the one
// *dst holds is looked up among the names this Event had before, so that an
// Event that events of a few tables are decoded into, interleaved, allocates
// each name once.
func (d *decoder) name(f field, dst *string) {
	if b := d.bytes(f); *dst != string(b) {
		d.newName(b, dst)
	}
}

func (d *decoder) newName(b []byte, dst *string) {
	r := *d.names
	if r != nil {
		if s, ok := r.find(b); ok {
			*dst = s
			return
		}
	}
	s := string(b)
	if *dst != "" {
		// A reused Event whose name changed: from now on remember.
		if r == nil {
			r = new(nameRing)
			*d.names = r
			r.add(*dst)
		}
		r.add(s)
	} else if r != nil {
		r.add(s)
	}
	*dst = s
}

// nameRing holds the last few names an Event had.
type nameRing struct {
	s    [8]string
	next int
}

func (r *nameRing) find(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	for i := range r.s {
		if r.s[i] == string(b) {
			return r.s[i], true
		}
	}
	return "", false
}

func (r *nameRing) add(s string) {
	r.s[r.next] = s
	r.next = (r.next + 1) % len(r.s)
}

func (d *decoder) table(t *TableName) {
	d.name(fSchema, &t.Schema)
	d.name(fTableName, &t.Name)
	d.tableRest(t)
}

// tableRest decodes the fields of a table after its names.
func (d *decoder) tableRest(t *TableName) {
	t.PhysicalID = d.varint(fPhysicalID)
	off := d.off
	flags := d.byte1(fTableFlags)
	if flags&tableReserved != 0 {
		d.fail(fTableFlags, off, ErrMalformed, "reserved bits set in %#02x", flags)
	}
	t.IsPartition = flags&tableIsPartition != 0
}

// Smallest encodings of list entries, for count.
const (
	minColumnLen   = 4 // empty name, type, flags, tag of a NULL
	minDDLTableLen = 5 // empty schema and name, one-byte ID, flags, role
)

func (d *decoder) decodeRow(r *RowChange, commitTs uint64) {
	r.CommitTs = commitTs
	r.StartTs = commitTs - d.uvarint(fStartTs)
	var tc *tableCache
	if d.x != nil {
		tc = d.cachedTable(&r.Table)
	} else {
		d.table(&r.Table)
	}
	nCols := d.count(fColumnCount, minColumnLen, 0)
	// n_pre is checked together with n_cols: both lists follow it.
	nPre := d.count(fPreColumnCount, minColumnLen, nCols)
	if d.err != nil {
		return
	}
	r.Columns = d.columns(r.Columns, nCols, inColumns, tc)
	r.PreColumns = d.columns(r.PreColumns, nPre, inPreColumns, tc)
	d.section = inHeader
}

// cachedTable decodes a row's table with the Decoder's memory of tables, and
// returns what the Decoder remembers of it.
func (d *decoder) cachedTable(t *TableName) *tableCache {
	x := d.x
	start := d.off
	schema := d.bytes(fSchema)
	sEnd := d.off
	name := d.bytes(fTableName)
	if d.err != nil {
		return nil
	}
	key := d.b[start:d.off] // at least the two lengths
	h := (uint(len(key)) + 7*uint(key[len(key)-1])) % uint(len(x.recent))
	tc := x.recent[h]
	if tc == nil || tc.key != string(key) {
		tc = x.tables[string(key)]
		if tc == nil {
			if x.tables == nil || len(x.tables) >= maxDecoderTables {
				x.tables = make(map[string]*tableCache)
				x.recent = [len(x.recent)]*tableCache{}
				x.strs = nil
			}
			k := string(key)
			sStart, nStart := sEnd-len(schema)-start, d.off-len(name)-start
			tc = &tableCache{key: k, schema: k[sStart : sStart+len(schema)], name: k[nStart:]}
			x.tables[k] = tc
		}
		x.recent[h] = tc
	}
	t.Schema, t.Name = tc.schema, tc.name
	d.tableRest(t)
	return tc
}

// columns decodes n columns into cols, reusing its backing array (and the
// strings left in it by earlier events). With tc, the columns whose encoded
// definitions are those tc remembers take its fields, and tc learns the
// others.
func (d *decoder) columns(cols []Column, n int, section uint8, tc *tableCache) []Column {
	if cap(cols) < n {
		grown := make([]Column, n)
		copy(grown, cols[:cap(cols)])
		cols = grown
	}
	cols = cols[:n]
	d.section = section
	i := 0
	if tc != nil {
		i = d.knownColumns(cols, n, tc)
	}
	for ; i < len(cols); i++ {
		d.index = i
		c := &cols[i]
		if tc == nil {
			d.column(c)
		} else if i < len(tc.cols) {
			if end, kind, ok := tc.cols[i].match(d.b, d.off); ok {
				*c = tc.cols[i].col
				c.Value.kind = kind
				d.off = end
				d.value(&c.Value)
			} else {
				d.learn(c, tc, i)
			}
		} else {
			d.learn(c, tc, i)
		}
		if d.err != nil {
			return cols[:i]
		}
	}
	return cols
}

// knownColumns is the fast path of columns with a tableCache: it decodes the
// longest run of leading columns whose definitions are tc's (as match
// compares them) and whose values are plainly well formed, with no call but
// the comparison, and returns how many it decoded. It never fails: at the
// first column it is not sure of (another definition, a value that may be
// malformed or truncated) it stops, and columns decodes that column and the
// rest the general way, errors included.
//
// With cols nil it only checks n columns, and writes nothing: Check.
func (d *decoder) knownColumns(cols []Column, n int, tc *tableCache) int {
	b, off := d.b, d.off
	known := tc.cols
	i := 0
	for ; i < n && i < len(known); i++ {
		cc := &known[i]
		at := off + len(cc.def) // the value's payload
		if off < 0 || at > len(b) || cc.tagAt >= len(cc.def) {
			break
		}
		tag := b[off+cc.tagAt]
		if want := cc.def[cc.tagAt]; tag != want {
			// Another value kind (NULL or not) and the same definition?
			if (tag^want)&^tagKindMask != 0 || tag&tagKindMask > byte(maxKind) {
				break
			}
			cc.def[cc.tagAt] = tag
		}
		if string(b[off:at]) != string(cc.def) {
			break
		}
		kind := Kind(tag & tagKindMask)
		var num uint64
		var vb []byte
		var end int
		switch kind {
		case KindNull:
			end = at
		case KindInt:
			u, e := fastUvarint(b, at)
			num, end = uint64(int64(u>>1)^-int64(u&1)), e
		case KindDuration:
			u, e := fastUvarint(b, at)
			num, end = uint64(int64(u>>1)^-int64(u&1)), e
			if !packedDurationOK(num) {
				end = 0
			}
		case KindUint, KindBit, KindEnum, KindSet:
			num, end = fastUvarint(b, at)
		case KindYear:
			num, end = fastUvarint(b, at)
			if num > 0xffff {
				end = 0
			}
		case KindFloat32:
			if len(b)-at >= 4 {
				num, end = uint64(binary.LittleEndian.Uint32(b[at:])), at+4
			}
		case KindFloat64:
			if len(b)-at >= 8 {
				num, end = binary.LittleEndian.Uint64(b[at:]), at+8
			}
		case KindDate, KindDatetime, KindTimestamp:
			if len(b)-at >= 8 {
				num, end = binary.LittleEndian.Uint64(b[at:]), at+8
				if !packedDateTimeOK(kind, num) {
					end = 0
				}
			}
		case KindDecimal, KindString, KindBytes, KindJSON:
			if n, e := fastUvarint(b, at); e > 0 && n <= uint64(len(b)-e) {
				end = e + int(n)
				vb = b[e:end:end]
			}
		}
		if end == 0 {
			break // not sure: the general way decides
		}
		off = end
		if cols == nil {
			continue
		}
		c := &cols[i]
		if !sameDef(c, &cc.col) {
			// Events are reused: a column that held this definition
			// (the same strings) keeps it, and is not written again.
			*c = cc.col
		}
		c.Value.kind = kind
		c.Value.num = num
		if vb != nil || c.Value.b != nil {
			c.Value.b = vb
		}
	}
	d.off = off
	return i
}

// sameDef reports whether a holds b's definition with the very same strings
// (the Decoder interns them), which is cheaper to check than to write again.
func sameDef(a, b *Column) bool {
	return a.Type == b.Type && a.Flags == b.Flags &&
		unsafe.StringData(a.Name) == unsafe.StringData(b.Name) && len(a.Name) == len(b.Name) &&
		unsafe.StringData(a.Charset) == unsafe.StringData(b.Charset) && len(a.Charset) == len(b.Charset) &&
		unsafe.StringData(a.Collation) == unsafe.StringData(b.Collation) && len(a.Collation) == len(b.Collation)
}

// fastUvarint reads a uvarint of at most 9 bytes at b[off:], and returns it
// and where it ends; the end is 0 when the input ends inside it or it is
// longer (the general uvarint then decides).
func fastUvarint(b []byte, off int) (uint64, int) {
	if off >= 0 && off < len(b) && b[off] < 0x80 {
		return uint64(b[off]), off + 1
	}
	var v uint64
	for s := uint(0); s < 63 && off >= 0 && off < len(b); s += 7 {
		c := b[off]
		off++
		v |= uint64(c&0x7f) << s
		if c < 0x80 {
			return v, off
		}
	}
	return 0, 0
}

// learn decodes column i into c, and makes tc remember its definition.
func (d *decoder) learn(c *Column, tc *tableCache, i int) {
	start := d.off
	t, defEnd := d.column(c)
	if d.err != nil || i > len(tc.cols) {
		return
	}
	if i == len(tc.cols) {
		tc.cols = append(tc.cols, colCache{})
	}
	x := d.x
	tc.cols[i] = colCache{def: append(tc.cols[i].def[:0], d.b[start:defEnd]...), tagAt: t - start,
		col: Column{Name: x.intern(c.Name), Type: c.Type, Flags: c.Flags, Charset: x.intern(c.Charset), Collation: x.intern(c.Collation)}}
}

// column decodes a column, and returns the offsets of its tag and of the
// end of its definition, where its value's payload starts.
func (d *decoder) column(c *Column) (tagOff, defEnd int) {
	d.str(fName, &c.Name)
	if left := len(d.b) - d.off; left < 3 {
		// The field the input ends before: type, flags or tag.
		d.fail(fType+field(left), d.off+left, ErrTruncated, "input ends before it")
		return 0, 0
	}
	c.Type = Type(d.b[d.off])
	c.Flags = ColumnFlag(d.b[d.off+1])
	tagOff = d.off + 2
	tag := d.b[tagOff]
	d.off += 3
	kind := Kind(tag & tagKindMask)
	if tag&tagReserved != 0 {
		d.fail(fTag, tagOff, ErrMalformed, "tag %#02x: reserved bit 7 set", tag)
		return 0, 0
	}
	if kind > maxKind {
		d.fail(fTag, tagOff, ErrMalformed, "tag %#02x: unknown value kind %d", tag, kind)
		return 0, 0
	}
	// A writer sets bit 5 (6) exactly when the charset (collation) is not
	// empty, so an empty one after the bit is not what any writer wrote:
	// accepting it would give one event two encodings and let a flipped bit
	// pass.
	if !d.flaggedStr(tag&tagHasCharset != 0, fCharset, &c.Charset, "bit 5", "charset") ||
		!d.flaggedStr(tag&tagHasCollation != 0, fCollation, &c.Collation, "bit 6", "collation") {
		return 0, 0
	}
	c.Value.kind = kind
	defEnd = d.off
	d.value(&c.Value)
	return tagOff, defEnd
}

// value decodes the payload of a value whose kind is set.
func (d *decoder) value(v *Value) {
	kind := v.kind
	v.num = 0
	v.b = nil
	switch kind {
	case KindNull:
	case KindInt:
		v.num = uint64(d.varint(fValue))
	case KindDuration:
		off := d.off
		v.num = uint64(d.varint(fValue))
		if d.err == nil {
			if msg := checkPackedDuration(v.num); msg != "" {
				d.fail(fValue, off, ErrMalformed, "duration: %s", msg)
			}
		}
	case KindUint, KindBit, KindEnum, KindSet:
		v.num = d.uvarint(fValue)
	case KindYear:
		off := d.off
		v.num = d.uvarint(fValue)
		if v.num > 0xffff {
			d.fail(fValue, off, ErrMalformed, "year %d does not fit 16 bits", v.num)
		}
	case KindFloat32:
		v.num = uint64(d.fixed32(fValue))
	case KindFloat64:
		v.num = d.fixed64(fValue)
	case KindDate, KindDatetime, KindTimestamp:
		off := d.off
		v.num = d.fixed64(fValue)
		if d.err == nil {
			if msg := checkPackedDateTime(kind, v.num); msg != "" {
				d.fail(fValue, off, ErrMalformed, "%s %#016x: %s", kind, v.num, msg)
			}
		}
	case KindDecimal, KindString, KindBytes, KindJSON:
		v.b = d.bytes(fValue)
	}
}

func (d *decoder) decodeDDL(x *DDL, commitTs uint64) {
	x.CommitTs = commitTs
	x.StartTs = commitTs - d.uvarint(fStartTs)
	d.table(&x.Table)
	x.Type = ActionType(d.byte1(fDDLType))
	d.str(fQuery, &x.Query)
	n := d.count(fTableCount, minDDLTableLen, 0)
	if d.err != nil {
		return
	}
	if cap(x.Tables) < n {
		grown := make([]DDLTable, n)
		copy(grown, x.Tables[:cap(x.Tables)])
		x.Tables = grown
	}
	x.Tables = x.Tables[:n]
	d.section = inTables
	for i := range x.Tables {
		d.index = i
		t := &x.Tables[i]
		d.table(&t.TableName)
		off := d.off
		t.Role = TableRole(d.byte1(fRole))
		if t.Role > maxRole {
			d.fail(fRole, off, ErrMalformed, "unknown table role %d", t.Role)
		}
		if d.err != nil {
			x.Tables = x.Tables[:i]
			return
		}
	}
	d.section = inHeader
}
