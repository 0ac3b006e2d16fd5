package msgpbench

import "github.com/redokit/redokit/codec"

// FromEvent converts ev into the TiCDC-shaped msgp record, the way TiCDC turns
// datums into msgpack values: integers and floats as themselves, character
// and binary data as []byte, decimals, dates and JSON as text.
func FromEvent(ev *codec.Event) *RedoLog {
	r := &ev.Row
	meta := func(cols []codec.Column) []*ColumnMeta {
		out := make([]*ColumnMeta, len(cols))
		for i, c := range cols {
			out[i] = &ColumnMeta{Name: c.Name, Type: byte(c.Type), Charset: c.Charset, Collation: c.Collation}
		}
		return out
	}
	values := func(cols []codec.Column) []ColumnValue {
		out := make([]ColumnValue, len(cols))
		for i, c := range cols {
			v := c.Value
			out[i].Flag = uint64(c.Flags)
			switch v.Kind() {
			case codec.KindNull:
			case codec.KindInt:
				out[i].Value = v.Int()
			case codec.KindUint, codec.KindBit, codec.KindEnum, codec.KindSet:
				out[i].Value = v.Uint()
			case codec.KindFloat32:
				out[i].Value = v.Float32()
			case codec.KindFloat64:
				out[i].Value = v.Float64()
			case codec.KindYear:
				out[i].Value = int64(v.Year())
			case codec.KindString, codec.KindBytes:
				out[i].Value = v.Bytes()
				out[i].ValueIsEmptyBytes = len(v.Bytes()) == 0
			case codec.KindDate:
				out[i].Value = v.DateTime().String()[:10]
			case codec.KindDatetime, codec.KindTimestamp:
				out[i].Value = v.DateTime().String()
			case codec.KindDuration:
				out[i].Value = v.Duration().String()
			default:
				out[i].Value = v.Text()
			}
		}
		return out
	}
	return &RedoLog{
		Type: 1,
		RedoRow: RedoRowEvent{
			Row: &RowInRedoLog{
				StartTs: r.StartTs, CommitTs: r.CommitTs,
				Table:   &TableName{Schema: r.Table.Schema, Table: r.Table.Name, TableID: r.Table.PhysicalID, IsPartition: r.Table.IsPartition},
				Columns: meta(r.Columns), PreColumns: meta(r.PreColumns),
			},
			Columns:    values(r.Columns),
			PreColumns: values(r.PreColumns),
		},
	}
}

// Prefix is what TiCDC puts before a msgp record: 0xff 0xff and a
// big-endian uint16 codec version (2).
var Prefix = []byte{0xff, 0xff, 0x00, 0x02}

// Append appends rl as TiCDC encodes a redo record: Prefix, then msgpack.
func Append(dst []byte, rl *RedoLog) []byte {
	dst = append(dst, Prefix...)
	dst, err := rl.MarshalMsg(dst)
	if err != nil {
		panic(err)
	}
	return dst
}
