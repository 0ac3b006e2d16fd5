package sqliteddl

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/mysqltok"
)

// SQLite derives a column's affinity from its declared type, and the
// affinity converts what is stored: a column of INTEGER or NUMERIC affinity
// turns text that reads as a number into an INTEGER or a REAL (a REAL keeps
// 15 digits), and one of REAL affinity stores an integral REAL as an
// integer, which loses the sign of -0. The rules look for "INT" first, so
// any type containing it has INTEGER affinity. The sink binds each value as
// package sqlsink's Dialect.arg says; this file declares every column so
// that what is bound is what is kept.

// class is what a MySQL column type becomes in SQLite.
type class uint8

const (
	keep      class = iota // the MySQL type, whose affinity keeps the bound values
	textNum                // TEXT: numbers beyond int64 or REAL (BIGINT UNSIGNED, DECIMAL, BIT(64), SET of 64)
	textJSON               // TEXT: JSON, whose bare numbers must stay text
	textChars              // TEXT: a character type whose name gives no TEXT affinity (LONG)
	float                  // FLOAT/DOUBLE BLOB: BLOB affinity keeps the REAL bound, -0 too
	enumInt                // INTEGER: ENUM's index
	setInt                 // INTEGER: SET's bitmap (of up to 63 members)
	bitInt                 // BIT(n), n < 64: NUMERIC affinity keeps the integer bound
	serial                 // SERIAL: BIGINT UNSIGNED NOT NULL UNIQUE
)

// colType is a column definition's type: its class, the declared type SQLite
// gets, and what the DEFAULT conversion needs.
type colType struct {
	class    class
	decl     []mysqltok.Token // the declared type for SQLite
	scale    int              // DECIMAL's scale
	members  []string         // ENUM's or SET's members
	end      int              // index in the definition after the type
	unsigned bool
}

// parseType reads the type of a column definition el (el[0] is the name).
func parseType(el []mysqltok.Token) (colType, error) {
	ct := colType{end: 1}
	if len(el) < 2 || el[1].Kind != mysqltok.Word {
		return ct, fmt.Errorf("%w: column definition %q has no type", apply.ErrUnsupportedDDL, mysqltok.Spaced(el))
	}
	base := el[1].Word()
	ct.end = 2
	var args [][]mysqltok.Token
	if ct.end < len(el) && base == "DOUBLE" && el[ct.end].Word() == "PRECISION" {
		ct.end++
	}
	if ct.end < len(el) && base == "LONG" && (el[ct.end].Word() == "VARBINARY" || el[ct.end].Word() == "VARCHAR") {
		base += " " + el[ct.end].Word()
		ct.end++
	}
	if ct.end < len(el) && el[ct.end].Is('(') {
		e := mysqltok.Closing(el, ct.end)
		if e < 0 {
			return ct, fmt.Errorf("%w: unbalanced parentheses", apply.ErrUnsupportedDDL)
		}
		args = mysqltok.SplitTop(el[ct.end+1 : e])
		ct.end = e + 1
	}
	for _, t := range el[ct.end:] {
		if t.Word() == "UNSIGNED" {
			ct.unsigned = true
		}
	}
	ct.decl = el[1:ct.end]
	intArg := func(i, def int) (int, error) {
		if i >= len(args) {
			return def, nil
		}
		if len(args[i]) != 1 {
			return 0, fmt.Errorf("%w: %s type argument %q", apply.ErrUnsupportedDDL, base, mysqltok.Spaced(args[i]))
		}
		return strconv.Atoi(args[i][0].Text)
	}
	text := []mysqltok.Token{{Kind: mysqltok.Word, Text: "TEXT"}}
	switch base {
	case "BIGINT", "INT8":
		if ct.unsigned {
			ct.class, ct.decl = textNum, text
		}
	case "SERIAL":
		ct.class, ct.decl, ct.unsigned = serial, text, true
	case "DECIMAL", "NUMERIC", "DEC", "FIXED":
		ct.class, ct.decl = textNum, text
		s, err := intArg(1, 0)
		if err != nil {
			return ct, fmt.Errorf("%w: %s scale: %v", apply.ErrUnsupportedDDL, base, err)
		}
		ct.scale = s
	case "BIT":
		n, err := intArg(0, 1)
		if err != nil {
			return ct, fmt.Errorf("%w: BIT width: %v", apply.ErrUnsupportedDDL, err)
		}
		ct.class = bitInt
		if n >= 64 {
			ct.class, ct.decl = textNum, text
		}
	case "BINARY", "VARBINARY", "LONG VARBINARY":
		// Bytes are bound as BLOBs, which no affinity changes; BLOB
		// affinity keeps text too, should a producer send one.
		ct.decl = []mysqltok.Token{{Kind: mysqltok.Word, Text: "BLOB"}}
	case "JSON":
		ct.class, ct.decl = textJSON, text
	case "LONG", "LONG VARCHAR":
		ct.class, ct.decl = textChars, text
	case "FLOAT", "FLOAT4":
		ct.class, ct.decl = float, []mysqltok.Token{{Kind: mysqltok.Word, Text: "FLOAT"}, {Kind: mysqltok.Word, Text: "BLOB"}}
	case "DOUBLE", "REAL", "FLOAT8":
		ct.class, ct.decl = float, []mysqltok.Token{{Kind: mysqltok.Word, Text: "DOUBLE"}, {Kind: mysqltok.Word, Text: "BLOB"}}
	case "ENUM", "SET":
		for _, a := range args {
			if len(a) != 1 || a[0].Kind != mysqltok.String {
				return ct, fmt.Errorf("%w: %s member %q", apply.ErrUnsupportedDDL, base, mysqltok.Spaced(a))
			}
			m, err := mysqlString(a[0].Text)
			if err != nil {
				return ct, err
			}
			// MySQL strips trailing spaces from members.
			ct.members = append(ct.members, strings.TrimRight(m, " "))
		}
		ct.class, ct.decl = enumInt, []mysqltok.Token{{Kind: mysqltok.Word, Text: "INTEGER"}}
		if base == "SET" {
			ct.class = setInt
			if len(ct.members) >= 64 {
				ct.class, ct.decl = textNum, text // its bitmap may pass 2^63-1
			}
		}
	}
	return ct, nil
}

// defaultValue converts the DEFAULT value at toks[0] (after the word
// DEFAULT) into what SQLite must store for MySQL's value, and returns the
// tokens of that value and how many of toks it took. The default matters:
// ADD COLUMN gives it to every existing row.
func (ct colType) defaultValue(toks []mysqltok.Token) ([]mysqltok.Token, int, error) {
	if len(toks) == 0 {
		return nil, 0, fmt.Errorf("%w: DEFAULT without a value", apply.ErrUnsupportedDDL)
	}
	n := 1
	var lit string // the literal's text as MySQL reads it
	isString, isNumber := false, false
	switch t := toks[0]; {
	case t.Is('(') || t.Word() == "NULL" || t.Word() == "CURRENT_TIMESTAMP" || t.Word() == "NOW" || t.Word() == "LOCALTIMESTAMP":
		return nil, 0, nil // an expression, NULL, or the time: as before
	case (t.Is('-') || t.Is('+')) && len(toks) > 1 && toks[1].Kind == mysqltok.Word && isDigit(toks[1].Text[0]) && !strings.HasPrefix(toks[1].Text, "0x"):
		lit, n, isNumber = t.Text+toks[1].Text, 2, true
		if t.Is('+') {
			lit = toks[1].Text
		}
	case t.Kind == mysqltok.Word && (strings.EqualFold(t.Text, "b") || strings.EqualFold(t.Text, "x")) && len(toks) > 1 && toks[1].Kind == mysqltok.String:
		s, err := mysqlString(toks[1].Text)
		if err != nil {
			return nil, 0, err
		}
		base := 2
		if strings.EqualFold(t.Text, "x") {
			base = 16
		}
		u, err := strconv.ParseUint(s, base, 64)
		if err != nil || ct.class != bitInt && (ct.class != textNum || ct.members != nil) {
			return nil, 0, fmt.Errorf("%w: DEFAULT %s%s for a %s column", apply.ErrUnsupportedDDL, t.Text, toks[1].Text, mysqltok.Spaced(ct.decl))
		}
		lit, n, isNumber = strconv.FormatUint(u, 10), 2, true
	case t.Kind == mysqltok.Word && (strings.HasPrefix(t.Text, "0x") || strings.HasPrefix(t.Text, "0b")):
		base := 16
		if t.Text[1] == 'b' {
			base = 2
		}
		u, err := strconv.ParseUint(t.Text[2:], base, 64)
		if err != nil || ct.class != bitInt && (ct.class != textNum || ct.members != nil) {
			// (For a string column it is a string, for an integer a
			// number: the rewrite does not tell them apart.)
			return nil, 0, fmt.Errorf("%w: DEFAULT %s for a %s column", apply.ErrUnsupportedDDL, t.Text, mysqltok.Spaced(ct.decl))
		}
		lit, isNumber = strconv.FormatUint(u, 10), true
	case t.Kind == mysqltok.Word && isDigit(t.Text[0]):
		lit, isNumber = t.Text, true
	case t.Is('.') && len(toks) > 1 && toks[1].Kind == mysqltok.Word && isDigit(toks[1].Text[0]):
		lit, n, isNumber = "0."+toks[1].Text, 2, true
	case t.Kind == mysqltok.Word && (t.Text[0] == '_' || strings.EqualFold(t.Text, "N")) && len(toks) > 1 && toks[1].Kind == mysqltok.String:
		// A charset introducer: _utf8mb4'x', N'x'.
		s, err := mysqlString(toks[1].Text)
		if err != nil {
			return nil, 0, err
		}
		lit, n, isString = s, 2, true
	case t.Kind == mysqltok.String:
		s, err := mysqlString(t.Text)
		if err != nil {
			return nil, 0, err
		}
		lit, isString = s, true
	default:
		return nil, 0, nil // TRUE, FALSE, …: as before
	}
	// The tokenizer splits 1.50 into "1", ".", "50".
	if isNumber {
		for n+1 < len(toks) && toks[n].Is('.') && toks[n+1].Kind == mysqltok.Word && isDigit(toks[n+1].Text[0]) {
			lit += "." + toks[n+1].Text
			n += 2
		}
	}
	str := func(s string) []mysqltok.Token {
		return []mysqltok.Token{{Kind: mysqltok.String, Text: sqliteString(s)}}
	}
	switch ct.class {
	case textNum, serial:
		switch {
		case ct.members != nil: // a SET of 64 members
			u, err := ct.setBits(lit, isString)
			if err != nil {
				return nil, 0, err
			}
			return str(strconv.FormatUint(u, 10)), n, nil
		case ct.unsigned || ct.class == serial:
			u, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(lit), "+"), 10, 64)
			if err != nil {
				return nil, 0, fmt.Errorf("%w: DEFAULT %q of an unsigned column", apply.ErrUnsupportedDDL, lit)
			}
			return str(strconv.FormatUint(u, 10)), n, nil
		}
		d, err := formatDecimal(strings.TrimSpace(lit), ct.scale)
		if err != nil {
			return nil, 0, err
		}
		return str(d), n, nil
	case enumInt:
		if isNumber {
			return []mysqltok.Token{{Kind: mysqltok.Word, Text: lit}}, n, nil
		}
		for i, m := range ct.members {
			if strings.EqualFold(m, strings.TrimRight(lit, " ")) {
				return []mysqltok.Token{{Kind: mysqltok.Word, Text: strconv.Itoa(i + 1)}}, n, nil
			}
		}
		return nil, 0, fmt.Errorf("%w: ENUM DEFAULT %q is no member", apply.ErrUnsupportedDDL, lit)
	case setInt:
		u, err := ct.setBits(lit, isString)
		if err != nil {
			return nil, 0, err
		}
		return []mysqltok.Token{{Kind: mysqltok.Word, Text: strconv.FormatUint(u, 10)}}, n, nil
	case bitInt:
		if isString {
			return nil, 0, fmt.Errorf("%w: BIT DEFAULT %q", apply.ErrUnsupportedDDL, lit)
		}
		return []mysqltok.Token{{Kind: mysqltok.Word, Text: lit}}, n, nil
	}
	if isString {
		return str(lit), n, nil
	}
	return []mysqltok.Token{{Kind: mysqltok.Word, Text: lit}}, n, nil
}

func (ct colType) setBits(lit string, isString bool) (uint64, error) {
	if !isString {
		return strconv.ParseUint(lit, 10, 64)
	}
	var u uint64
	if lit == "" {
		return 0, nil
	}
next:
	for _, m := range strings.Split(lit, ",") {
		for i, mm := range ct.members {
			if strings.EqualFold(m, mm) {
				u |= 1 << i
				continue next
			}
		}
		return 0, fmt.Errorf("%w: SET DEFAULT %q: %q is no member", apply.ErrUnsupportedDDL, lit, m)
	}
	return u, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// formatDecimal renders a decimal number as MySQL stores it in a DECIMAL of
// the given scale: scale fraction digits, rounded half away from zero, no
// leading zeros, no negative zero.
func formatDecimal(s string, scale int) (string, error) {
	bad := func() (string, error) {
		return "", fmt.Errorf("%w: DECIMAL DEFAULT %q", apply.ErrUnsupportedDDL, s)
	}
	neg := false
	t := s
	if t != "" && (t[0] == '-' || t[0] == '+') {
		neg, t = t[0] == '-', t[1:]
	}
	ip, fp, _ := strings.Cut(t, ".")
	if ip == "" && fp == "" {
		return bad()
	}
	for _, c := range ip + fp {
		if c < '0' || c > '9' {
			return bad() // exponents, garbage: not guessed at
		}
	}
	digits := []byte(ip + fp)
	point := len(ip)
	if len(fp) < scale {
		digits = append(digits, strings.Repeat("0", scale-len(fp))...)
	} else if len(fp) > scale {
		roundUp := digits[point+scale] >= '5'
		digits = digits[:point+scale]
		for i := len(digits) - 1; roundUp && i >= 0; i-- {
			if digits[i] == '9' {
				digits[i] = '0'
				continue
			}
			digits[i]++
			roundUp = false
		}
		if roundUp {
			digits = append([]byte{'1'}, digits...)
			point++
		}
	}
	intPart := strings.TrimLeft(string(digits[:point]), "0")
	if intPart == "" {
		intPart = "0"
	}
	out := intPart
	if scale > 0 {
		out += "." + string(digits[point:])
	}
	if neg && strings.Trim(string(digits), "0") != "" {
		out = "-" + out
	}
	return out, nil
}

// mysqlString returns the value of a MySQL string token (mysqltok.Unquote),
// refusing a NUL, which the rewritten DDL could not carry.
func mysqlString(tok string) (string, error) {
	v := mysqltok.Unquote(tok)
	if strings.IndexByte(v, 0) >= 0 {
		return "", fmt.Errorf("%w: a NUL in the string %s", apply.ErrUnsupportedDDL, tok)
	}
	return v, nil
}

// sqliteString quotes s as a SQLite string literal (no escapes but ”).
func sqliteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
