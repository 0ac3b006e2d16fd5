package difffuzz

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redokit/redokit/apply/internal/sqlsink"
	"github.com/redokit/redokit/codec"
)

// The comparison brings both sides to one text per value: the model's
// value as the sink must hold it (its documented losses applied), and what
// the sink returns, canonicalized only where the sinks print one value
// differently (a float's digits, the fraction digits of a time, the case
// of hex).

// Want returns the rows of t as sink d must hold them, each its values
// joined by "|", sorted.
func Want(t *Table, d sqlsink.Dialect) []string {
	out := make([]string, 0, len(t.Rows))
	for _, row := range t.Rows {
		parts := make([]string, len(row))
		for i, v := range row {
			parts[i] = wantValue(t.Cols[i], v, d)
		}
		out = append(out, strings.Join(parts, "|"))
	}
	slices.Sort(out)
	return out
}

func wantValue(c *Column, v codec.Value, d sqlsink.Dialect) string {
	if v.IsNull() {
		return "NULL"
	}
	switch c.T.fam {
	case fInt:
		return strconv.FormatInt(v.Int(), 10)
	case fUint, fBit, fEnum, fSet:
		return strconv.FormatUint(v.Uint(), 10)
	case fF32:
		f := v.Float32()
		if f == 0 && d == sqlsink.MySQL {
			f = 0 // MariaDB has no negative zero (documented)
		}
		return strconv.FormatFloat(float64(f), 'g', -1, 32)
	case fF64:
		f := v.Float64()
		if f == 0 && d == sqlsink.MySQL {
			f = 0
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case fBytes:
		return hex.EncodeToString(v.Bytes())
	case fDate:
		t := v.DateTime()
		return fmt.Sprintf("%04d-%02d-%02d", t.Year, t.Month, t.Day)
	case fDT:
		t := v.DateTime()
		return fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d.%06d", t.Year, t.Month, t.Day, t.Hour, t.Minute, t.Second, t.Microsecond)
	case fTime:
		return durText(v.Duration().Micros)
	case fYear:
		return strconv.Itoa(int(v.Year()))
	}
	return v.Text() // decimal, string, JSON
}

func durText(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	s := m / 1e6
	return fmt.Sprintf("%s%02d:%02d:%02d.%06d", sign, s/3600, s/60%60, s%60, m%1e6)
}

// SelectExpr is the expression that reads column c on sink d as text.
func SelectExpr(c *Column, d sqlsink.Dialect) string {
	n := d.Quote(c.Name)
	switch d {
	case sqlsink.MySQL:
		switch c.T.fam {
		case fBit, fEnum, fSet:
			return n + "+0"
		case fBytes:
			return "HEX(" + n + ")"
		}
	case sqlsink.Postgres:
		if c.T.fam == fBytes {
			return "encode(" + n + ", 'hex')"
		}
		return n + "::text"
	case sqlsink.SQLite:
		switch c.T.fam {
		case fDate, fDT, fTime:
			// modernc's driver parses a DATE or DATETIME column's text
			// into a time.Time: read what SQLite holds.
			return "CAST(" + n + " AS TEXT)"
		}
		if c.T.fam == fBytes {
			return "CASE WHEN " + n + " IS NULL THEN NULL ELSE hex(" + n + ") END"
		}
	}
	return n
}

// Canon brings the text a sink returned for column c to the form Want
// gives.
func Canon(c *Column, s string) string {
	switch c.T.fam {
	case fF32, fF64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return "unparsable float " + strconv.Quote(s)
		}
		if c.T.fam == fF32 {
			return strconv.FormatFloat(float64(float32(f)), 'g', -1, 32)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	case fBytes:
		return strings.ToLower(s)
	case fDT:
		s = strings.TrimSuffix(strings.Replace(s, "T", " ", 1), "+00")
		s = strings.TrimSuffix(s, "Z")
		date, frac, _ := strings.Cut(s, ".")
		return date + "." + (frac + "000000")[:6]
	case fTime:
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		hms, frac, _ := strings.Cut(s, ".")
		p := strings.Split(hms, ":")
		if len(p) != 3 {
			return "unparsable time " + strconv.Quote(s)
		}
		h, _ := strconv.ParseInt(p[0], 10, 64)
		m, _ := strconv.ParseInt(p[1], 10, 64)
		sec, _ := strconv.ParseInt(p[2], 10, 64)
		us, _ := strconv.ParseInt((frac + "000000")[:6], 10, 64)
		micros := ((h*60+m)*60+sec)*1e6 + us
		if neg {
			micros = -micros
		}
		return durText(micros)
	}
	return s
}

// SQLiteText is the text of a value modernc's driver returned.
func SQLiteText(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	case string:
		return x, true
	case []byte:
		return string(x), true
	}
	return fmt.Sprintf("%T %v", v, v), true
}

// Format writes events one a line, for a failure message: at most max
// lines, the events in the middle of a longer history left out (a big
// transaction's inserts, mostly).
func Format(evs []codec.Event, max int) string {
	var b strings.Builder
	if len(evs) > max {
		head, tail := evs[:max/2], evs[len(evs)-max/2:]
		return Format(head, max) + fmt.Sprintf("  … %d events …\n", len(evs)-len(head)-len(tail)) + Format(tail, max)
	}
	for _, ev := range evs {
		if ev.IsDDL() {
			fmt.Fprintf(&b, "  ts %d DDL %s\n", ev.DDL.CommitTs, ev.DDL.Query)
			continue
		}
		fmt.Fprintf(&b, "  ts %d %s %s -> %s\n", ev.Row.CommitTs, ev.Row.Table.Name, imageText(ev.Row.PreColumns), imageText(ev.Row.Columns))
	}
	return b.String()
}

func imageText(cols []codec.Column) string {
	if cols == nil {
		return "-"
	}
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + "=" + c.Value.String()
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
