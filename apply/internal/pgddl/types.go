package pgddl

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/apply/internal/mysqltok"
)

// class groups PostgreSQL column types by how their values convert.
type class uint8

const (
	clInt       class = iota + 1 // smallint, integer, bigint, numeric(20,0) of an integer type
	clNumeric                    // numeric(p,s) of a DECIMAL
	clFloat                      // real, double precision
	clString                     // varchar(n), text
	clBytes                      // bytea
	clDate                       // date
	clDatetime                   // timestamp(f) without time zone
	clTimestamp                  // timestamptz(f)
	clTime                       // interval
	clJSON                       // json
	clEnum                       // smallint: the member's number
	clSet                        // bigint or numeric(20,0): the bitmap
	clBit                        // bigint or numeric(20,0)
	clYear                       // smallint
)

// colType is a MySQL column type and its PostgreSQL translation.
type colType struct {
	mysql   string   // the MySQL type as written (normalized spacing), for messages and comments
	base    string   // the upper-case MySQL type word: INT, VARCHAR, ENUM…
	args    []string // the numbers in parentheses
	members []string // ENUM and SET members
	binary  bool     // CHARACTER SET binary: a char type is a binary one
	pg      string
	class   class
}

// marker reports whether the column's PostgreSQL type forgets what a later
// MODIFY needs (ENUM and SET members, BIT width, YEAR), so that its MySQL type is
// kept in the column's comment.
func (c *colType) marker() bool {
	return c.class == clEnum || c.class == clSet || c.class == clBit || c.class == clYear
}

func unsupported(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{apply.ErrUnsupportedDDL}, a...)...)
}

// parseType reads a MySQL type at el[0] and its UNSIGNED, SIGNED and
// ZEROFILL attributes; it returns the number of tokens read. The
// translation (pg, class) is left to finish, as a later CHARACTER SET binary
// changes it.
func parseType(el []mysqltok.Token) (colType, int, bool, error) {
	var ct colType
	if len(el) == 0 || el[0].Word() == "" {
		return ct, 0, false, unsupported("column type %q", mysqltok.Spaced(el))
	}
	n := 1
	ct.base = el[0].Word()
	two := func(next ...string) bool {
		if n < len(el) {
			for _, w := range next {
				if el[n].Word() == w {
					n++
					return true
				}
			}
		}
		return false
	}
	switch ct.base {
	case "DOUBLE":
		two("PRECISION")
	case "CHARACTER", "CHAR":
		if two("VARYING") {
			ct.base = "VARCHAR"
		} else {
			ct.base = "CHAR"
		}
	case "NATIONAL":
		if !two("CHAR", "CHARACTER", "VARCHAR") {
			return ct, 0, false, unsupported("column type %q", mysqltok.Spaced(el[:1]))
		}
		ct.base = el[n-1].Word()
		if ct.base == "CHARACTER" {
			ct.base = "CHAR"
		}
		if (ct.base == "CHAR") && two("VARYING") {
			ct.base = "VARCHAR"
		}
	case "NCHAR":
		ct.base = "CHAR"
		if two("VARCHAR", "VARYING") {
			ct.base = "VARCHAR"
		}
	case "NVARCHAR":
		ct.base = "VARCHAR"
	case "LONG":
		switch {
		case two("VARBINARY"):
			ct.base = "MEDIUMBLOB"
		default:
			two("VARCHAR")
			ct.base = "MEDIUMTEXT"
		}
	}
	if n < len(el) && el[n].Is('(') {
		end := mysqltok.Closing(el, n)
		if end < 0 {
			return ct, 0, false, unsupported("unbalanced parentheses in column type")
		}
		for _, part := range mysqltok.SplitTop(el[n+1 : end]) {
			switch {
			case ct.base == "ENUM" || ct.base == "SET":
				s, ok := stringValue(part)
				if !ok {
					return ct, 0, false, unsupported("%s member %q", ct.base, mysqltok.Spaced(part))
				}
				ct.members = append(ct.members, s)
			case len(part) == 1 && part[0].Kind == mysqltok.Word && isDigits(part[0].Text):
				ct.args = append(ct.args, part[0].Text)
			default:
				return ct, 0, false, unsupported("column type %q", mysqltok.Spaced(el[:end+1]))
			}
		}
		n = end + 1
	}
	unsigned := false
	for n < len(el) {
		switch el[n].Word() {
		case "UNSIGNED", "ZEROFILL":
			unsigned = true
		case "SIGNED":
		default:
			ct.mysql = mysqltok.Spaced(el[:n])
			return ct, n, unsigned, nil
		}
		n++
	}
	ct.mysql = mysqltok.Spaced(el[:n])
	return ct, n, unsigned, nil
}

// stringValue returns the text of a MySQL string literal (with an optional
// _charset or N introducer), unescaped.
func stringValue(toks []mysqltok.Token) (string, bool) {
	if len(toks) == 2 && toks[0].Kind == mysqltok.Word && (strings.HasPrefix(toks[0].Text, "_") || toks[0].Word() == "N") {
		toks = toks[1:]
	}
	if len(toks) != 1 || toks[0].Kind != mysqltok.String {
		return "", false
	}
	return mysqltok.Unquote(toks[0].Text), true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// finish computes the PostgreSQL type (see the package doc's table).
func (ct *colType) finish(unsigned bool) error {
	arg := func(i int, def int) int {
		if i < len(ct.args) {
			n, _ := strconv.Atoi(ct.args[i])
			return n
		}
		return def
	}
	fsp := func() string {
		f := arg(0, 0)
		if f > 6 {
			f = 6
		}
		return "(" + strconv.Itoa(f) + ")"
	}
	switch ct.base {
	case "TINYINT", "BOOL", "BOOLEAN":
		ct.pg, ct.class = "smallint", clInt
	case "SMALLINT":
		ct.pg, ct.class = "smallint", clInt
		if unsigned {
			ct.pg = "integer"
		}
	case "MEDIUMINT":
		ct.pg, ct.class = "integer", clInt
	case "INT", "INTEGER":
		ct.pg, ct.class = "integer", clInt
		if unsigned {
			ct.pg = "bigint"
		}
	case "BIGINT":
		ct.pg, ct.class = "bigint", clInt
		if unsigned {
			ct.pg = "numeric(20,0)"
		}
	case "BIT":
		ct.pg, ct.class = "bigint", clBit
		if arg(0, 1) > 63 {
			ct.pg = "numeric(20,0)"
		}
	case "FLOAT":
		// FLOAT(p) with p over 24 is a DOUBLE; FLOAT(M,D) is a FLOAT.
		ct.pg, ct.class = "real", clFloat
		if len(ct.args) == 1 && arg(0, 0) > 24 {
			ct.pg = "double precision"
		}
	case "DOUBLE", "REAL", "FLOAT8":
		ct.pg, ct.class = "double precision", clFloat
	case "FLOAT4":
		ct.pg, ct.class = "real", clFloat
	case "DECIMAL", "NUMERIC", "DEC", "FIXED":
		ct.pg, ct.class = fmt.Sprintf("numeric(%d,%d)", max(arg(0, 10), 1), arg(1, 0)), clNumeric
	case "CHAR", "VARCHAR":
		if ct.binary {
			ct.pg, ct.class = "bytea", clBytes
			break
		}
		// MySQL allows CHAR(0) (holding the empty string or NULL); PostgreSQL's
		// varchar needs a length of 1 at least.
		ct.pg, ct.class = fmt.Sprintf("varchar(%d)", max(arg(0, 1), 1)), clString
	case "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT":
		ct.pg, ct.class = "text", clString
		if ct.binary {
			ct.pg, ct.class = "bytea", clBytes
		}
	case "BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB":
		ct.pg, ct.class = "bytea", clBytes
	case "DATE":
		ct.pg, ct.class = "date", clDate
	case "DATETIME":
		ct.pg, ct.class = "timestamp"+fsp()+" without time zone", clDatetime
	case "TIMESTAMP":
		ct.pg, ct.class = "timestamptz"+fsp(), clTimestamp
	case "TIME":
		ct.pg, ct.class = "interval", clTime
	case "YEAR":
		ct.pg, ct.class = "smallint", clYear
	case "ENUM":
		// The member's number: up to 65535 members in MySQL, past
		// smallint's 32767.
		ct.pg, ct.class = "smallint", clEnum
		if len(ct.members) > 32767 {
			ct.pg = "integer"
		}
	case "SET":
		ct.pg, ct.class = "bigint", clSet
		if len(ct.members) > 63 {
			ct.pg = "numeric(20,0)"
		}
	case "JSON":
		ct.pg, ct.class = "json", clJSON
	case "GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
		"GEOMETRYCOLLECTION", "GEOMCOLLECTION":
		return unsupported("spatial type %s", ct.base)
	case "SERIAL":
		return unsupported("SERIAL (BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE): spell it out")
	default:
		return unsupported("column type %s", ct.mysql)
	}
	return nil
}

// Default values.

type defMode uint8

const (
	defExact    defMode = iota // the value MySQL gives
	defVolatile                // CURRENT_TIMESTAMP: kept, but no existing row can get the upstream's value
	defDropped                 // cannot be written exactly: left out
)

// defaultVal is a translated DEFAULT: sql is "" when the default is left out.
type defaultVal struct {
	sql  string
	mode defMode
	why  string // for defVolatile and defDropped: why existing rows cannot get it
}

var numberRE = regexp.MustCompile(`^[+-]*(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$`)

// defaultExtent returns the end (exclusive) of the DEFAULT value starting at
// el[i].
func defaultExtent(el []mysqltok.Token, i int) (int, error) {
	if i >= len(el) {
		return 0, unsupported("DEFAULT without a value")
	}
	t := el[i]
	switch {
	case t.Is('('):
		if e := mysqltok.Closing(el, i); e >= 0 {
			return e + 1, nil
		}
		return 0, unsupported("unbalanced parentheses in DEFAULT")
	case t.Kind == mysqltok.String:
		return i + 1, nil
	case t.Kind == mysqltok.Word && i+1 < len(el) && el[i+1].Kind == mysqltok.String &&
		(strings.HasPrefix(t.Text, "_") || t.Word() == "N" || t.Word() == "X" || t.Word() == "B"):
		return i + 2, nil
	case t.Is('-') || t.Is('+') || t.Is('.') || t.Kind == mysqltok.Word && t.Text[0] >= '0' && t.Text[0] <= '9':
		j := i
		for j < len(el) && (el[j].Is('-') || el[j].Is('+')) {
			j++
		}
		for j < len(el) {
			switch {
			case el[j].Kind == mysqltok.Word && el[j].Text[0] >= '0' && el[j].Text[0] <= '9':
				w := el[j].Text
				j++
				if (w[len(w)-1] == 'e' || w[len(w)-1] == 'E') && !strings.HasPrefix(strings.ToLower(w), "0x") &&
					j+1 < len(el) && (el[j].Is('-') || el[j].Is('+')) {
					j++ // the exponent's sign; its digits follow
				}
				continue
			case el[j].Is('.'):
				j++
				continue
			}
			break
		}
		return j, nil
	case t.Kind == mysqltok.Word:
		j := i + 1
		if j < len(el) && el[j].Is('(') {
			if e := mysqltok.Closing(el, j); e >= 0 {
				j = e + 1
			}
		}
		return j, nil
	}
	return 0, unsupported("DEFAULT %s", t.Text)
}

// translateDefault translates the DEFAULT value v for a column of type ct.
func translateDefault(ct *colType, v []mysqltok.Token) (defaultVal, error) {
	text := mysqltok.Spaced(v)
	bad := func() (defaultVal, error) {
		return defaultVal{}, unsupported("DEFAULT %s for a %s column", text, ct.mysql)
	}
	dropped := func(why string) (defaultVal, error) { return defaultVal{mode: defDropped, why: why}, nil }
	exact := func(s string) (defaultVal, error) { return defaultVal{sql: s}, nil }
	if len(v) == 1 && v[0].Word() == "NULL" {
		return exact("") // no default is NULL
	}
	if v[0].Is('(') {
		return dropped("is an expression " + text + ", which is not translated")
	}
	w := v[0].Word()
	switch w {
	case "CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_DATE", "CURDATE", "UTC_TIMESTAMP":
		if ct.class != clDatetime && ct.class != clTimestamp && ct.class != clDate {
			return bad()
		}
		s := "CURRENT_TIMESTAMP"
		if ct.class == clDate {
			s = "CURRENT_DATE"
		} else if len(v) == 4 && v[1].Is('(') && v[2].Kind == mysqltok.Word && isDigits(v[2].Text) {
			s += "(" + v[2].Text + ")"
		}
		if w == "UTC_TIMESTAMP" || w == "CURRENT_DATE" || w == "CURDATE" {
			return dropped("is " + text + ", which is not translated")
		}
		return defaultVal{sql: s, mode: defVolatile,
			why: "is " + text + ": the rows there get the time of the DDL upstream, which the log does not carry"}, nil
	}
	// The value as bytes, and as a number when it is one.
	var b []byte
	num := ""
	isStr := false
	switch {
	case w == "TRUE":
		num = "1"
	case w == "FALSE":
		num = "0"
	case len(v) == 2 && w == "X" && v[1].Kind == mysqltok.String:
		h, err := hex.DecodeString(mysqltok.Unquote(v[1].Text))
		if err != nil {
			return bad()
		}
		b = h
	case len(v) == 2 && w == "B" && v[1].Kind == mysqltok.String:
		bits, ok := bitBytes(mysqltok.Unquote(v[1].Text))
		if !ok {
			return bad()
		}
		b = bits
	case len(v) == 1 && v[0].Kind == mysqltok.Word && strings.HasPrefix(strings.ToLower(v[0].Text), "0x"):
		h, err := hex.DecodeString(padEven(v[0].Text[2:]))
		if err != nil {
			return bad()
		}
		b = h
	case len(v) == 1 && v[0].Kind == mysqltok.Word && strings.HasPrefix(strings.ToLower(v[0].Text), "0b"):
		bits, ok := bitBytes(v[0].Text[2:])
		if !ok {
			return bad()
		}
		b = bits
	default:
		if s, ok := stringValue(v); ok {
			b, isStr = []byte(s), true
			break
		}
		joined := strings.Join(tokTexts(v), "")
		if !numberRE.MatchString(joined) {
			return bad()
		}
		num = normalizeSign(joined)
	}
	if num != "" {
		b = []byte(num)
	}
	bytesNum := func() string { return new(big.Int).SetBytes(b).String() }
	switch ct.class {
	case clInt, clNumeric, clFloat, clBit:
		switch {
		case num != "":
			return exact(num)
		case isStr && numberRE.MatchString(strings.TrimSpace(string(b))):
			return exact(normalizeSign(strings.TrimSpace(string(b))))
		case !isStr || ct.class == clBit:
			// A hex or bit literal (and for BIT a string) is a
			// big-endian binary number.
			if len(b) > 8 {
				return bad()
			}
			return exact(bytesNum())
		}
		return bad()
	case clYear:
		s := string(b)
		if num == "" && !isStr {
			s = bytesNum()
		}
		y, ok := mysqlYear(s, isStr)
		if !ok {
			return bad()
		}
		return exact(strconv.Itoa(y))
	case clEnum:
		if num != "" && isDigits(num) {
			return exact(num)
		}
		if !isStr {
			return bad()
		}
		i := member(ct.members, string(b))
		if i < 0 {
			return bad()
		}
		return exact(strconv.Itoa(i + 1))
	case clSet:
		if num != "" && isDigits(num) {
			return exact(num)
		}
		if !isStr {
			return bad()
		}
		var bits big.Int
		if len(b) > 0 {
			for _, m := range strings.Split(string(b), ",") {
				i := member(ct.members, m)
				if i < 0 {
					return bad()
				}
				bits.SetBit(&bits, i, 1)
			}
		}
		return exact(bits.String())
	case clString:
		if !utf8.Valid(b) || strings.IndexByte(string(b), 0) >= 0 {
			return dropped("is " + text + ", which PostgreSQL text cannot hold")
		}
		return exact(literal(string(b)))
	case clBytes:
		if ct.base == "BINARY" || ct.binary && ct.base == "CHAR" {
			// MySQL pads a BINARY(n) value with zero bytes to n.
			n := 1
			if len(ct.args) > 0 {
				n, _ = strconv.Atoi(ct.args[0])
			}
			for len(b) < n {
				b = append(b, 0)
			}
		}
		return exact(literal(`\x`+hex.EncodeToString(b)) + "::bytea")
	case clDate, clDatetime, clTimestamp:
		if !isStr {
			return dropped("is " + text + ", which is not translated")
		}
		s := string(b)
		if zeroDate(s) {
			return dropped("is the zero date " + text + ", which PostgreSQL cannot hold")
		}
		if !dateRE.MatchString(s) {
			return dropped("is " + text + ", which is not translated")
		}
		if ct.class == clTimestamp {
			return dropped("is the TIMESTAMP " + text + ", in the upstream session's time zone, which the log does not carry")
		}
		return exact(literal(s))
	case clTime:
		if isStr && timeRE.MatchString(string(b)) {
			return exact(literal(string(b)))
		}
		return dropped("is " + text + ", which is not translated")
	case clJSON:
		return dropped("is " + text + ", which is not translated")
	}
	return bad()
}

var (
	dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}( \d{2}:\d{2}:\d{2}(\.\d{1,6})?)?$`)
	timeRE = regexp.MustCompile(`^-?\d{1,3}:\d{2}(:\d{2}(\.\d{1,6})?)?$`)
)

// zeroDate reports whether a date has a zero year, month or day, which
// PostgreSQL has no value for.
func zeroDate(s string) bool {
	if len(s) < 10 {
		return false
	}
	return s[:4] == "0000" || s[5:7] == "00" || s[8:10] == "00"
}

// mysqlYear returns the YEAR a default gives: one or two digits are 2000-2069
// and 1970-1999 (a number 0 is the zero year, a string '0' is 2000).
func mysqlYear(s string, isStr bool) (int, bool) {
	s = strings.TrimSpace(s)
	if !isDigits(s) {
		return 0, false
	}
	y, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	switch {
	case y == 0 && !isStr:
		return 0, true
	case len(s) <= 2 && y < 70:
		return 2000 + y, true
	case len(s) <= 2:
		return 1900 + y, true
	case y >= 1901 && y <= 2155:
		return y, true
	}
	return 0, false
}

// member returns the index of the ENUM or SET member s: the exact one, or
// else the one equal ignoring case (MySQL's usual collations ignore case).
func member(members []string, s string) int {
	for i, m := range members {
		if m == s {
			return i
		}
	}
	found := -1
	for i, m := range members {
		if strings.EqualFold(strings.TrimRight(m, " "), strings.TrimRight(s, " ")) {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

func bitBytes(s string) ([]byte, bool) {
	var n big.Int
	if s == "" {
		return nil, true
	}
	if _, ok := n.SetString(s, 2); !ok {
		return nil, false
	}
	return n.Bytes(), true
}

func padEven(s string) string {
	if len(s)%2 == 1 {
		return "0" + s
	}
	return s
}

func tokTexts(toks []mysqltok.Token) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.Text
	}
	return out
}

// normalizeSign folds a run of signs into one (MySQL takes "- -1").
func normalizeSign(s string) string {
	neg := false
	i := 0
	for ; i < len(s) && (s[i] == '-' || s[i] == '+'); i++ {
		if s[i] == '-' {
			neg = !neg
		}
	}
	if neg {
		return "-" + s[i:]
	}
	return s[i:]
}

// implicitDefault is the value MySQL gives the existing rows when a NOT NULL
// column without a DEFAULT is added: "" when PostgreSQL cannot give the same.
func implicitDefault(ct *colType) string {
	switch ct.class {
	case clInt, clNumeric, clFloat, clBit, clSet, clYear:
		return "0"
	case clEnum:
		return "1" // the first member
	case clString:
		return "''"
	case clBytes:
		if ct.base == "BINARY" || ct.binary && ct.base == "CHAR" {
			return "" // n zero bytes; not worth the guess
		}
		return literal(`\x`) + "::bytea"
	case clTime:
		return "'00:00:00'"
	}
	return ""
}
