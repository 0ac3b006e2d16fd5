package codec

import (
	"encoding/binary"
	"math/bits"
	"strconv"
)

// Version is the format version AppendEvent writes, the first byte of every
// encoded event.
const Version = 1

// Bits of a column's tag byte above the value kind.
const (
	tagKindMask     = 0x1f
	tagHasCharset   = 0x20
	tagHasCollation = 0x40
	tagReserved     = 0x80
)

// Bits of a table's flags byte.
const (
	tableIsPartition = 0x01
	tableReserved    = 0xfe
)

// headerLen is the fixed part of every event: version, kind, commit ts.
const headerLen = 10

// AppendEvent appends the encoding of ev to dst and returns the extended
// buffer. It cannot fail: every Event built from this package's types has an
// encoding. It panics if ev.Kind is neither RowEvent nor DDLEvent, which is a
// programming error like a nil ev.
func AppendEvent(dst []byte, ev *Event) []byte {
	switch ev.Kind {
	case RowEvent:
		r := &ev.Row
		dst = appendHeader(dst, RowEvent, r.StartTs, r.CommitTs)
		dst = appendTable(dst, &r.Table)
		dst = appendUvarint(dst, uint64(len(r.Columns)))
		dst = appendUvarint(dst, uint64(len(r.PreColumns)))
		for i := range r.Columns {
			dst = appendColumn(dst, &r.Columns[i])
		}
		for i := range r.PreColumns {
			dst = appendColumn(dst, &r.PreColumns[i])
		}
	case DDLEvent:
		d := &ev.DDL
		dst = appendHeader(dst, DDLEvent, d.StartTs, d.CommitTs)
		dst = appendTable(dst, &d.Table)
		dst = append(dst, byte(d.Type))
		dst = appendString(dst, d.Query)
		dst = appendUvarint(dst, uint64(len(d.Tables)))
		for i := range d.Tables {
			dst = appendTable(dst, &d.Tables[i].TableName)
			dst = append(dst, byte(d.Tables[i].Role))
		}
	default:
		panic("codec: AppendEvent of an event of kind " + strconv.Itoa(int(ev.Kind)))
	}
	return dst
}

func appendHeader(dst []byte, kind EventKind, startTs, commitTs uint64) []byte {
	dst = append(dst, Version, byte(kind))
	dst = binary.LittleEndian.AppendUint64(dst, commitTs)
	// Start ts as its distance below the commit ts: 3 to 5 bytes for real TSOs
	// instead of 8. The subtraction wraps, so any pair round-trips.
	return appendUvarint(dst, commitTs-startTs)
}

func appendTable(dst []byte, t *TableName) []byte {
	dst = appendString(dst, t.Schema)
	dst = appendString(dst, t.Name)
	dst = appendVarint(dst, t.PhysicalID)
	var flags byte
	if t.IsPartition {
		flags |= tableIsPartition
	}
	return append(dst, flags)
}

func appendColumn(dst []byte, c *Column) []byte {
	dst = appendString(dst, c.Name)
	v := &c.Value
	tag := byte(v.kind)
	if c.Charset != "" {
		tag |= tagHasCharset
	}
	if c.Collation != "" {
		tag |= tagHasCollation
	}
	dst = append(dst, byte(c.Type), byte(c.Flags), tag)
	if c.Charset != "" {
		dst = appendString(dst, c.Charset)
	}
	if c.Collation != "" {
		dst = appendString(dst, c.Collation)
	}
	switch v.kind {
	case KindNull:
	case KindInt, KindDuration:
		dst = appendVarint(dst, int64(v.num))
	case KindUint, KindYear, KindBit, KindEnum, KindSet:
		dst = appendUvarint(dst, v.num)
	case KindFloat32:
		dst = binary.LittleEndian.AppendUint32(dst, uint32(v.num))
	case KindFloat64, KindDate, KindDatetime, KindTimestamp:
		dst = binary.LittleEndian.AppendUint64(dst, v.num)
	case KindDecimal, KindString, KindBytes, KindJSON:
		dst = appendUvarint(dst, uint64(len(v.b)))
		dst = append(dst, v.b...)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = appendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendUvarint is binary.AppendUvarint with the one-byte case inlined: most
// lengths and counts here are below 128.
func appendUvarint(dst []byte, v uint64) []byte {
	if v < 0x80 {
		return append(dst, byte(v))
	}
	return binary.AppendUvarint(dst, v)
}

func appendVarint(dst []byte, v int64) []byte {
	return appendUvarint(dst, uint64(v<<1)^uint64(v>>63))
}

// EncodedLen returns len(AppendEvent(nil, ev)) without encoding: a writer
// that sizes its buffer first can encode in place, with no copy. It panics
// where AppendEvent does.
func EncodedLen(ev *Event) int {
	switch ev.Kind {
	case RowEvent:
		r := &ev.Row
		n := headerLen + uvarintLen(r.CommitTs-r.StartTs) + tableLen(&r.Table) +
			uvarintLen(uint64(len(r.Columns))) + uvarintLen(uint64(len(r.PreColumns)))
		for i := range r.Columns {
			n += columnLen(&r.Columns[i])
		}
		for i := range r.PreColumns {
			n += columnLen(&r.PreColumns[i])
		}
		return n
	case DDLEvent:
		d := &ev.DDL
		n := headerLen + uvarintLen(d.CommitTs-d.StartTs) + tableLen(&d.Table) + 1 +
			strLen(d.Query) + uvarintLen(uint64(len(d.Tables)))
		for i := range d.Tables {
			n += tableLen(&d.Tables[i].TableName) + 1
		}
		return n
	}
	panic("codec: EncodedLen of an event of kind " + strconv.Itoa(int(ev.Kind)))
}

func tableLen(t *TableName) int {
	return strLen(t.Schema) + strLen(t.Name) + uvarintLen(uint64(t.PhysicalID<<1)^uint64(t.PhysicalID>>63)) + 1
}

func columnLen(c *Column) int {
	n := strLen(c.Name) + 3
	if c.Charset != "" {
		n += strLen(c.Charset)
	}
	if c.Collation != "" {
		n += strLen(c.Collation)
	}
	v := &c.Value
	switch v.kind {
	case KindInt, KindDuration:
		n += uvarintLen(v.num<<1 ^ uint64(int64(v.num)>>63))
	case KindUint, KindYear, KindBit, KindEnum, KindSet:
		n += uvarintLen(v.num)
	case KindFloat32:
		n += 4
	case KindFloat64, KindDate, KindDatetime, KindTimestamp:
		n += 8
	case KindDecimal, KindString, KindBytes, KindJSON:
		n += uvarintLen(uint64(len(v.b))) + len(v.b)
	}
	return n
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

// uvarintLen is the length of v's uvarint: 7 bits a byte, at least one.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }
