package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
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
	if err := checkHeader(src); err != nil {
		return err
	}
	d := decoder{off: headerLen}
	kind := EventKind(src[1])
	commitTs := binary.LittleEndian.Uint64(src[2:headerLen])
	ev.Kind = kind
	if kind == RowEvent {
		// Value payloads are cut from a private copy so that a caller who
		// recycles src cannot change a decoded event.
		ev.buf = append(ev.buf[:0], src...)
		d.b = ev.buf
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

var fieldNames = [...]string{"start_ts", "schema", "table", "physical_id", "table_flags", "column_count",
	"pre_column_count", "name", "type", "flags", "tag", "charset", "collation", "value", "ddl_type",
	"query", "table_count", "role", "end"}

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
}

func (d *decoder) fail(f field, off int, sentinel error, format string, args ...any) {
	if d.err != nil {
		return
	}
	name := fieldNames[f]
	if d.section != inHeader {
		name = sectionNames[d.section] + "[" + strconv.Itoa(d.index) + "]." + name
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
func (d *decoder) str(f field, dst *string) {
	b := d.bytes(f)
	if *dst != string(b) {
		*dst = string(b)
	}
}

// count reads a list length and checks that the rest of the input could hold
// that many entries of at least min bytes each, which bounds what the caller
// allocates by the input's size.
func (d *decoder) count(f field, min int) int {
	start := d.off
	n := d.uvarint(f)
	if d.err != nil {
		return 0
	}
	if left := uint64(len(d.b) - d.off); n > left/uint64(min) {
		d.fail(f, start, ErrTruncated, "%d entries need at least %d bytes each, %d bytes left", n, min, left)
		return 0
	}
	return int(n)
}

func (d *decoder) table(t *TableName) {
	d.str(fSchema, &t.Schema)
	d.str(fTableName, &t.Name)
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
	d.table(&r.Table)
	nCols := d.count(fColumnCount, minColumnLen)
	nPre := d.count(fPreColumnCount, minColumnLen)
	if nCols+nPre > (len(d.b)-d.off)/minColumnLen {
		d.fail(fPreColumnCount, d.off, ErrTruncated, "%d columns need at least %d bytes, %d left",
			nCols+nPre, (nCols+nPre)*minColumnLen, len(d.b)-d.off)
	}
	if d.err != nil {
		return
	}
	r.Columns = d.columns(r.Columns, nCols, inColumns)
	r.PreColumns = d.columns(r.PreColumns, nPre, inPreColumns)
	d.section = inHeader
}

// columns decodes n columns into cols, reusing its backing array (and the
// strings left in it by earlier events).
func (d *decoder) columns(cols []Column, n int, section uint8) []Column {
	if cap(cols) < n {
		grown := make([]Column, n)
		copy(grown, cols[:cap(cols)])
		cols = grown
	}
	cols = cols[:n]
	d.section = section
	for i := range cols {
		d.index = i
		d.column(&cols[i])
		if d.err != nil {
			return cols[:i]
		}
	}
	return cols
}

func (d *decoder) column(c *Column) {
	d.str(fName, &c.Name)
	if len(d.b)-d.off < 3 {
		d.fail(fType, d.off, ErrTruncated, "type, flags and tag need 3 bytes, %d left", len(d.b)-d.off)
		return
	}
	c.Type = Type(d.b[d.off])
	c.Flags = ColumnFlag(d.b[d.off+1])
	tagOff := d.off + 2
	tag := d.b[tagOff]
	d.off += 3
	kind := Kind(tag & tagKindMask)
	if tag&tagReserved != 0 || kind > maxKind {
		d.fail(fTag, tagOff, ErrMalformed, "tag %#02x: unknown value kind %d or reserved bit set", tag, kind)
		return
	}
	if tag&tagHasCharset != 0 {
		d.str(fCharset, &c.Charset)
	} else {
		c.Charset = ""
	}
	if tag&tagHasCollation != 0 {
		d.str(fCollation, &c.Collation)
	} else {
		c.Collation = ""
	}
	v := &c.Value
	v.kind = kind
	v.num = 0
	v.b = nil
	switch kind {
	case KindNull:
	case KindInt, KindDuration:
		v.num = uint64(d.varint(fValue))
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
		if v.num&dtReserved != 0 {
			d.fail(fValue, off, ErrMalformed, "packed %s %#016x has the reserved bit set", kind, v.num)
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
	n := d.count(fTableCount, minDDLTableLen)
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
