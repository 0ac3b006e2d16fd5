package mysqltok

import (
	"fmt"
	"strings"
)

// Kind is what a Token is.
type Kind uint8

// Kinds.
const (
	Space  Kind = iota // white space or a comment
	Word               // a bare word or number
	Ident              // a `quoted` or "quoted" identifier
	String             // a 'string'
	Punct              // one character of punctuation
)

// Token is one token of MySQL text.
type Token struct {
	Kind Kind
	Text string // as written: quotes and escapes kept (a comment is " ")
	Off  int    // byte offset of the token in the tokenized text
}

// String is the token's kind and text, for messages.
func (t Token) String() string {
	kinds := [...]string{Space: "space", Word: "word", Ident: "ident", String: "string", Punct: "punct"}
	if int(t.Kind) < len(kinds) {
		return kinds[t.Kind] + " " + t.Text
	}
	return fmt.Sprintf("kind %d %s", t.Kind, t.Text)
}

// Word returns the upper-cased text of a bare word, "" otherwise.
func (t Token) Word() string {
	if t.Kind != Word {
		return ""
	}
	return strings.ToUpper(t.Text)
}

// Name returns an identifier's name: a bare word as is, a quoted one
// unquoted.
func (t Token) Name() string {
	switch t.Kind {
	case Word:
		return t.Text
	case Ident:
		q := t.Text[0]
		return strings.ReplaceAll(t.Text[1:len(t.Text)-1], string([]byte{q, q}), string(q))
	}
	return ""
}

// Unquote returns the value of a String token ('text' or "text"): a doubled
// quote character is one, and the backslash escapes of MySQL's default
// sql_mode are decoded (\0 is a NUL byte; \% and \_ keep their backslash,
// as MySQL does for LIKE patterns; a backslash before any other byte is
// that byte).
func Unquote(tok string) string {
	q := tok[0]
	body := tok[1 : len(tok)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == q && i+1 < len(body) && body[i+1] == q:
			i++
		case c == '\\' && i+1 < len(body):
			i++
			switch c = body[i]; c {
			case '0':
				c = 0
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'Z':
				c = 0x1a
			case '%', '_':
				b.WriteByte('\\')
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// IsName reports whether t is a bare word or a quoted identifier.
func (t Token) IsName() bool { return t.Kind == Word || t.Kind == Ident }

// Is reports whether t is the punctuation p.
func (t Token) Is(p byte) bool { return t.Kind == Punct && t.Text[0] == p }

// Tokenize splits MySQL text into tokens by the rules of the package doc.
// Quoted strings and identifiers end at their closing quote (doubled quotes
// and backslash escapes stay inside); comments (--, #, /* */) are space.
func Tokenize(s string) ([]Token, error) { return tokenize(s, false) }

// TokenizeANSI is Tokenize for the SQL of a database that quotes
// identifiers in double quotes (SQLite's and PostgreSQL's own text, MySQL
// under ANSI_QUOTES): "text" is an Ident token.
func TokenizeANSI(s string) ([]Token, error) { return tokenize(s, true) }

func tokenize(s string, ansi bool) ([]Token, error) {
	var toks []Token
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			for i < len(s) && strings.IndexByte(" \t\n\r", s[i]) >= 0 {
				i++
			}
			toks = append(toks, Token{Space, s[start:i], start})
		case c == '#' || c == '-' && strings.HasPrefix(s[i:], "-- "):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			toks = append(toks, Token{Space, " ", start})
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("unterminated comment")
			}
			i += end + 4
			// TiDB writes its extensions as /*T![feature] ... */
			// comments; the databases we rewrite for have none of
			// them, so they are skipped like any comment.
			toks = append(toks, Token{Space, " ", start})
		case c == '\'' || c == '"' || c == '`':
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated quote %c", c)
				}
				if s[i] == '\\' && c != '`' {
					i += 2
					continue
				}
				if s[i] == c {
					if i+1 < len(s) && s[i+1] == c {
						i += 2
						continue
					}
					i++
					break
				}
				i++
			}
			k := String
			if c == '`' || c == '"' && ansi {
				k = Ident
			}
			toks = append(toks, Token{k, s[start:i], start})
		case isWordByte(c):
			for i < len(s) && isWordByte(s[i]) {
				i++
			}
			toks = append(toks, Token{Word, s[start:i], start})
		default:
			i++
			toks = append(toks, Token{Punct, s[start:i], start})
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// Join renders tokens back to text, trimmed of space at either end.
func Join(toks []Token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.Text)
	}
	return strings.TrimSpace(b.String())
}

// Solid drops space tokens, and a trailing ';'.
func Solid(toks []Token) []Token {
	out := make([]Token, 0, len(toks))
	for _, t := range toks {
		if t.Kind != Space {
			out = append(out, t)
		}
	}
	for len(out) > 0 && out[len(out)-1].Is(';') {
		out = out[:len(out)-1]
	}
	return out
}

// Spaced renders solid tokens with a space between words.
func Spaced(toks []Token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && !t.Is(',') && !t.Is(')') && !t.Is('.') && !toks[i-1].Is('(') && !toks[i-1].Is('.') {
			b.WriteByte(' ')
		}
		b.WriteString(t.Text)
	}
	return b.String()
}

// Words reports whether toks starts with the given upper-case words.
func Words(toks []Token, ws ...string) bool {
	if len(toks) < len(ws) {
		return false
	}
	for i, w := range ws {
		if toks[i].Word() != w {
			return false
		}
	}
	return true
}

// SplitTop splits toks at commas outside parentheses.
func SplitTop(toks []Token) [][]Token {
	var parts [][]Token
	depth, start := 0, 0
	for i, t := range toks {
		switch {
		case t.Is('('):
			depth++
		case t.Is(')'):
			depth--
		case t.Is(',') && depth == 0:
			parts = append(parts, toks[start:i])
			start = i + 1
		}
	}
	return append(parts, toks[start:])
}

// Closing returns the index of the ')' matching the '(' at open, or -1.
func Closing(toks []Token, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch {
		case toks[i].Is('('):
			depth++
		case toks[i].Is(')'):
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// KeyPart splits an index key part (solid tokens), `col` [(length)]
// [ASC|DESC], into the column's name and its order ("ASC", "DESC" or ""),
// dropping MySQL's prefix length, which PostgreSQL and SQLite do not have
// (the index is then on the whole column); ok is false for anything else,
// such as a functional key part.
func KeyPart(col []Token) (name, order string, ok bool) {
	if len(col) == 0 || !col[0].IsName() {
		return "", "", false
	}
	rest := col[1:]
	if len(rest) > 0 && rest[0].Is('(') {
		if e := Closing(rest, 0); e >= 0 {
			rest = rest[e+1:]
		}
	}
	switch {
	case len(rest) == 0:
		return col[0].Name(), "", true
	case len(rest) == 1 && (rest[0].Word() == "ASC" || rest[0].Word() == "DESC"):
		return col[0].Name(), rest[0].Word(), true
	}
	return "", "", false
}
