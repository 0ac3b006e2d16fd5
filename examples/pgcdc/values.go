package main

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redokit/redokit/codec"
)

// PostgreSQL type OIDs the capture maps (pg_type.oid; fixed since 7.x).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidText        = 25
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidVarchar     = 1043
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidNumeric     = 1700
	oidJSONB       = 3802
)

// colType is what the log says of one upstream column: its MySQL type code
// and the attributes a sink needs to declare and bind it.
type colType struct {
	oid    uint32
	typmod int32
	typ    codec.Type
	flags  codec.ColumnFlag
	cs     string // charset
	coll   string // collation
	fsp    uint8  // timestamps: fractional digits
}

// mapColumn maps one column of a pgoutput relation to its log definition, or
// fails naming it: a type the capture cannot carry exactly is an error, not
// a text approximation.
func mapColumn(table, name string, oid uint32, typmod int32) (colType, error) {
	c := colType{oid: oid, typmod: typmod}
	switch oid {
	case oidBool:
		c.typ = codec.TypeTiny
	case oidInt2:
		c.typ = codec.TypeShort
	case oidInt4:
		c.typ = codec.TypeLong
	case oidInt8:
		c.typ = codec.TypeLonglong
	case oidNumeric:
		c.typ = codec.TypeNewDecimal
	case oidText, oidVarchar:
		c.typ, c.cs, c.coll = codec.TypeVarchar, "utf8mb4", "utf8mb4_bin"
		if oid == oidText {
			c.typ = codec.TypeLongBlob
		}
	case oidBytea:
		c.typ, c.flags, c.cs, c.coll = codec.TypeLongBlob, codec.FlagBinary, "binary", "binary"
	case oidFloat4:
		c.typ = codec.TypeFloat
	case oidFloat8:
		c.typ = codec.TypeDouble
	case oidDate:
		c.typ = codec.TypeDate
	case oidTimestamp, oidTimestamptz:
		c.typ = codec.TypeDatetime
		if oid == oidTimestamptz {
			c.typ = codec.TypeTimestamp
		}
		c.fsp = 6 // PostgreSQL's default precision: typmod -1
		if typmod >= 0 && typmod <= 6 {
			c.fsp = uint8(typmod)
		}
	case oidJSON, oidJSONB:
		c.typ = codec.TypeJSON
	default:
		return c, fmt.Errorf("table %s column %s: PostgreSQL type OID %d is not one the capture maps (int2/4/8, numeric, text, varchar, bytea, bool, float4/8, date, timestamp, timestamptz, json, jsonb)", table, name, oid)
	}
	return c, nil
}

// mysqlType is the column's MySQL type, as translateDDL writes it for the
// same PostgreSQL type: a table the initial snapshot creates is the one its
// CREATE TABLE would have made.
func (c colType) mysqlType() (string, error) {
	switch c.oid {
	case oidBool:
		return "TINYINT(1)", nil
	case oidInt2:
		return "SMALLINT", nil
	case oidInt4:
		return "INT", nil
	case oidInt8:
		return "BIGINT", nil
	case oidNumeric:
		// typmod is ((precision << 16) | scale) + 4; -1 unconstrained.
		if c.typmod < 4 {
			return "", fmt.Errorf("an unconstrained numeric has no exact MySQL DECIMAL: give its precision and scale")
		}
		p, s := (c.typmod-4)>>16&0xffff, (c.typmod-4)&0xffff
		if s > p {
			return "", fmt.Errorf("numeric(%d,%d) has no MySQL DECIMAL", p, int16(s<<5)>>5)
		}
		return fmt.Sprintf("DECIMAL(%d,%d)", p, s), nil
	case oidText:
		return "LONGTEXT", nil
	case oidVarchar:
		if c.typmod < 4 {
			return "", fmt.Errorf("a VARCHAR needs its length")
		}
		return fmt.Sprintf("VARCHAR(%d)", c.typmod-4), nil
	case oidBytea:
		return "LONGBLOB", nil
	case oidFloat4:
		return "FLOAT", nil
	case oidFloat8:
		return "DOUBLE", nil
	case oidDate:
		return "DATE", nil
	case oidTimestamp:
		return fmt.Sprintf("DATETIME(%d)", c.fsp), nil
	case oidTimestamptz:
		return fmt.Sprintf("TIMESTAMP(%d)", c.fsp), nil
	case oidJSON, oidJSONB:
		return "JSON", nil
	}
	return "", fmt.Errorf("type OID %d is not mapped", c.oid)
}

// toValue converts one column's pgoutput text to its codec value, exactly,
// or fails naming the column and the text.
func (c colType) toValue(table, name string, text []byte) (codec.Value, error) {
	s := string(text)
	bad := func(err error) (codec.Value, error) {
		return codec.Value{}, fmt.Errorf("table %s column %s: value %q: %w", table, name, trunc(s), err)
	}
	switch c.oid {
	case oidBool:
		switch s { // pgoutput sends t/f; a ::text cast gives true/false
		case "t", "true":
			return codec.IntValue(1), nil
		case "f", "false":
			return codec.IntValue(0), nil
		}
		return bad(fmt.Errorf("not a boolean"))
	case oidInt2, oidInt4, oidInt8:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return codec.IntValue(v), nil
	case oidNumeric:
		// NaN and ±Infinity (PostgreSQL 14+) have no DECIMAL form.
		if s == "" || strings.ContainsAny(s, "NnIi") {
			return bad(fmt.Errorf("no MySQL DECIMAL holds it"))
		}
		return codec.DecimalValue(s), nil
	case oidText, oidVarchar:
		return codec.StringValue(s), nil
	case oidBytea:
		h, ok := strings.CutPrefix(s, `\x`)
		if !ok {
			return bad(fmt.Errorf("not bytea hex output (bytea_output must be hex)"))
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			return bad(err)
		}
		return codec.BytesValue(b), nil
	case oidFloat4, oidFloat8:
		bits := 64
		if c.oid == oidFloat4 {
			bits = 32
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return bad(err)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return bad(fmt.Errorf("NaN and infinities have no MySQL FLOAT or DOUBLE form"))
		}
		if bits == 32 {
			return codec.Float32Value(float32(f)), nil
		}
		return codec.Float64Value(f), nil
	case oidDate:
		t, err := time.Parse("2006-01-02", s)
		if err != nil {
			return bad(err)
		}
		dt := dateTime(t, 0)
		dt.Hour, dt.Minute, dt.Second = 0, 0, 0
		if !dt.Valid() {
			return bad(fmt.Errorf("outside MySQL's DATE range"))
		}
		return codec.DateValue(dt), nil
	case oidTimestamp:
		t, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			return bad(err)
		}
		dt := dateTime(t, c.fsp)
		if !dt.Valid() {
			return bad(fmt.Errorf("outside MySQL's DATETIME(%d) range", c.fsp))
		}
		return codec.DatetimeValue(dt), nil
	case oidTimestamptz:
		// The replication session runs with TimeZone=UTC, but the offset
		// is read, not assumed.
		t, err := time.Parse("2006-01-02 15:04:05.999999-07", s)
		if err != nil {
			t, err = time.Parse("2006-01-02 15:04:05.999999-07:00", s)
		}
		if err != nil {
			return bad(err)
		}
		dt := dateTime(t.UTC(), c.fsp)
		if !dt.Valid() {
			return bad(fmt.Errorf("outside MySQL's TIMESTAMP(%d) range", c.fsp))
		}
		return codec.TimestampValue(dt), nil
	case oidJSON, oidJSONB:
		return codec.JSONValue(s), nil
	}
	return bad(fmt.Errorf("type OID %d is not mapped", c.oid))
}

func dateTime(t time.Time, fsp uint8) codec.DateTime {
	return codec.DateTime{
		Year: uint16(t.Year()), Month: uint8(t.Month()), Day: uint8(t.Day()),
		Hour: uint8(t.Hour()), Minute: uint8(t.Minute()), Second: uint8(t.Second()),
		Microsecond: uint32(t.Nanosecond() / 1000), Fsp: fsp,
	}
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
