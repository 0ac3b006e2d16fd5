package main

import (
	"strings"
	"testing"

	"github.com/redokit/redokit/codec"
	"github.com/redokit/redokit/meta"
)

func TestTranslateDDL(t *testing.T) {
	for _, c := range []struct{ pg, mysql string }{
		{"CREATE TABLE accounts (aid bigint PRIMARY KEY, bid int, abalance numeric(12,2), flag boolean, updated timestamptz, doc jsonb, raw bytea, score float8, born date, seen timestamp(3), small int2, ratio real)",
			"CREATE TABLE `accounts` (`aid` BIGINT NOT NULL, `bid` INT, `abalance` DECIMAL(12,2), `flag` TINYINT(1), `updated` TIMESTAMP(6), `doc` JSON, `raw` LONGBLOB, `score` DOUBLE, `born` DATE, `seen` DATETIME(3), `small` SMALLINT, `ratio` FLOAT, PRIMARY KEY (`aid`))"},
		{`create table if not exists public."T" (a integer not null, b character varying(10), c double precision, d timestamp with time zone, e timestamp(0) without time zone, primary key (a, b));`,
			"CREATE TABLE IF NOT EXISTS `T` (`a` INT NOT NULL, `b` VARCHAR(10), `c` DOUBLE, `d` TIMESTAMP(6), `e` DATETIME(0), PRIMARY KEY (`a`, `b`))"},
		{"ALTER TABLE tellers ADD COLUMN rank int", "ALTER TABLE `tellers` ADD COLUMN `rank` INT"},
		{"alter table only s.t add if not exists memo text", "ALTER TABLE `t` ADD COLUMN `memo` LONGTEXT"},
		{"DROP TABLE IF EXISTS extra", "DROP TABLE IF EXISTS `extra`"},
	} {
		got, _, _, err := translateDDL(c.pg)
		if err != nil {
			t.Errorf("%s: %v", c.pg, err)
			continue
		}
		if got != c.mysql {
			t.Errorf("%s:\n got %s\nwant %s", c.pg, got, c.mysql)
		}
	}
	// What it cannot translate exactly is an error quoting the statement.
	for _, pg := range []string{
		"CREATE INDEX i ON t (a)",
		"CREATE TABLE t (a numeric)",
		"CREATE TABLE t (a int DEFAULT 1)",
		"CREATE TABLE t (a serial)",
		"CREATE TABLE t (a char(3))",
		"CREATE TABLE t (a int, UNIQUE (a))",
		"ALTER TABLE t DROP COLUMN a",
		"ALTER TABLE t ADD COLUMN a int CHECK (a > 0)",
		"DROP TABLE a, b",
		"DROP TABLE a CASCADE",
		"CREATE TABLE t (a int); DROP TABLE u",
		"TRUNCATE t",
		"CREATE TABLE t (a interval)",
	} {
		if got, _, _, err := translateDDL(pg); err == nil {
			t.Errorf("%s: translated to %q, want an error", pg, got)
		} else if !strings.Contains(err.Error(), trunc(pg)) {
			t.Errorf("%s: error %q does not quote the statement", pg, err)
		}
	}
}

func TestValues(t *testing.T) {
	for _, c := range []struct {
		oid    uint32
		typmod int32
		text   string
		want   codec.Value
	}{
		{oidBool, -1, "t", codec.IntValue(1)},
		{oidBool, -1, "false", codec.IntValue(0)},
		{oidInt8, -1, "-9223372036854775808", codec.IntValue(-9223372036854775808)},
		{oidNumeric, 12<<16 | 2 + 4, "-12.30", codec.DecimalValue("-12.30")},
		{oidText, -1, "é\x00?", codec.StringValue("é\x00?")},
		{oidBytea, -1, `\x00ff2a`, codec.BytesValue([]byte{0, 0xff, 0x2a})},
		{oidFloat8, -1, "0.1", codec.Float64Value(0.1)},
		{oidFloat4, -1, "0.1", codec.Float32Value(0.1)},
		{oidFloat8, -1, "-0", codec.Float64Value(negZero())},
		{oidDate, -1, "2024-02-29", codec.DateValue(codec.DateTime{Year: 2024, Month: 2, Day: 29})},
		{oidTimestamp, 3, "2026-06-01 12:00:00.5", codec.DatetimeValue(codec.DateTime{Year: 2026, Month: 6, Day: 1, Hour: 12, Microsecond: 500000, Fsp: 3})},
		{oidTimestamptz, -1, "2026-01-01 02:00:00.000001+02", codec.TimestampValue(codec.DateTime{Year: 2026, Month: 1, Day: 1, Microsecond: 1, Fsp: 6})},
		{oidTimestamptz, -1, "2026-01-01 00:00:00+05:30", codec.TimestampValue(codec.DateTime{Year: 2025, Month: 12, Day: 31, Hour: 18, Minute: 30, Fsp: 6})},
		{oidJSONB, -1, `{"a": [1, 2]}`, codec.JSONValue(`{"a": [1, 2]}`)},
	} {
		ct, err := mapColumn("t", "c", c.oid, c.typmod)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ct.toValue("t", "c", []byte(c.text))
		if err != nil {
			t.Errorf("OID %d %q: %v", c.oid, c.text, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("OID %d %q: got %v (%v), want %v (%v)", c.oid, c.text, got, got.Kind(), c.want, c.want.Kind())
		}
	}
	// Values with no exact MySQL form are errors naming the column.
	for _, c := range []struct {
		oid  uint32
		text string
	}{
		{oidNumeric, "NaN"}, {oidNumeric, "Infinity"}, {oidFloat8, "NaN"}, {oidFloat4, "-Infinity"},
		{oidTimestamp, "infinity"}, {oidDate, "0044-03-15 BC"}, {oidBytea, "abc"}, {oidBool, "yes"},
	} {
		ct, _ := mapColumn("t", "c", c.oid, -1)
		if v, err := ct.toValue("t", "price", []byte(c.text)); err == nil {
			t.Errorf("OID %d %q: got %v, want an error", c.oid, c.text, v)
		} else if !strings.Contains(err.Error(), "column price") {
			t.Errorf("OID %d %q: error %q does not name the column", c.oid, c.text, err)
		}
	}
	for _, oid := range []uint32{1186 /* interval */, 2950 /* uuid */, 1042 /* bpchar */, 869 /* inet */} {
		if _, err := mapColumn("t", "odd", oid, -1); err == nil || !strings.Contains(err.Error(), "column odd") {
			t.Errorf("OID %d: err %v, want one naming the column", oid, err)
		}
	}
}

func negZero() float64 {
	z := 0.0
	return -z
}

func TestSpans(t *testing.T) {
	m, err := parseTables("a,b:id:100:200,c", 2)
	if err != nil {
		t.Fatal(err)
	}
	b := m.tables["b"]
	for _, c := range []struct {
		key  int64
		span meta.SpanID
	}{{-5, 2}, {99, 2}, {100, 3}, {199, 3}, {200, 4}, {1 << 40, 4}} {
		if got := b.span(c.key); got != c.span {
			t.Errorf("key %d: span %d, want %d", c.key, got, c.span)
		}
	}
	if m.tables["c"].first != 5 || len(m.all) != 5 {
		t.Errorf("spans %v, c at %d", m.all, m.tables["c"].first)
	}
	if got := m.owned(0); len(got) != 3 || got[0] != 1 || got[1] != 3 || got[2] != 5 {
		t.Errorf("writer 0 owns %v", got)
	}
	for _, bad := range []string{"a,a", "a:id", "a:id:5:5", "a:id:x", ""} {
		if _, err := parseTables(bad, 2); err == nil {
			t.Errorf("-tables %q: no error", bad)
		}
	}
}
