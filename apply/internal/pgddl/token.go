package pgddl

import (
	"fmt"
	"strings"
)

// The tokenizer and token helpers are a copy of package sqliteddl's (the
// two are to be folded into one package).

type tokKind uint8

const (
	tokSpace  tokKind = iota // white space or a comment
	tokWord                  // a bare word or number
	tokIdent                 // a `quoted` or "quoted" identifier
	tokString                // a 'string'
	tokPunct                 // one character of punctuation
)

type token struct {
	kind tokKind
	text string
}

// word returns the upper-cased text of a bare word, "" otherwise.
func (t token) word() string {
	if t.kind != tokWord {
		return ""
	}
	return strings.ToUpper(t.text)
}

// name returns an identifier's name: a bare word as is, a quoted one
// unquoted.
func (t token) name() string {
	switch t.kind {
	case tokWord:
		return t.text
	case tokIdent:
		q := t.text[0]
		return strings.ReplaceAll(t.text[1:len(t.text)-1], string([]byte{q, q}), string(q))
	}
	return ""
}

func (t token) isName() bool { return t.kind == tokWord || t.kind == tokIdent }

func (t token) is(p byte) bool { return t.kind == tokPunct && t.text[0] == p }

// tokenize splits MySQL text into tokens. Quoted strings and identifiers end
// at their closing quote (doubled quotes and backslash escapes stay inside);
// comments (--, #, /* */) are space.
func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		start := i
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			for i < len(s) && strings.IndexByte(" \t\n\r", s[i]) >= 0 {
				i++
			}
			toks = append(toks, token{tokSpace, s[start:i]})
		case c == '#' || c == '-' && strings.HasPrefix(s[i:], "-- "):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			toks = append(toks, token{tokSpace, " "})
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("unterminated comment")
			}
			i += end + 4
			// TiDB writes its extensions as /*T![feature] ... */
			// comments; SQLite skips them like any comment.
			toks = append(toks, token{tokSpace, " "})
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
			k := tokIdent
			if c == '\'' {
				k = tokString
			}
			toks = append(toks, token{k, s[start:i]})
		case isWordByte(c):
			for i < len(s) && isWordByte(s[i]) {
				i++
			}
			toks = append(toks, token{tokWord, s[start:i]})
		default:
			i++
			toks = append(toks, token{tokPunct, s[start:i]})
		}
	}
	return toks, nil
}

func isWordByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// join renders tokens back to text.
func join(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.text)
	}
	return strings.TrimSpace(b.String())
}

// solid drops space tokens, and a trailing ';'.
func solid(toks []token) []token {
	out := make([]token, 0, len(toks))
	for _, t := range toks {
		if t.kind != tokSpace {
			out = append(out, t)
		}
	}
	for len(out) > 0 && out[len(out)-1].is(';') {
		out = out[:len(out)-1]
	}
	return out
}

// spaced renders solid tokens with a space between words.
func spaced(toks []token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && !t.is(',') && !t.is(')') && !t.is('.') && !toks[i-1].is('(') && !toks[i-1].is('.') {
			b.WriteByte(' ')
		}
		b.WriteString(t.text)
	}
	return b.String()
}

// words reports whether toks starts with the given upper-case words.
func words(toks []token, ws ...string) bool {
	if len(toks) < len(ws) {
		return false
	}
	for i, w := range ws {
		if toks[i].word() != w {
			return false
		}
	}
	return true
}

// splitTop splits toks at commas outside parentheses.
func splitTop(toks []token) [][]token {
	var parts [][]token
	depth, start := 0, 0
	for i, t := range toks {
		switch {
		case t.is('('):
			depth++
		case t.is(')'):
			depth--
		case t.is(',') && depth == 0:
			parts = append(parts, toks[start:i])
			start = i + 1
		}
	}
	return append(parts, toks[start:])
}

// closing returns the index of the ')' matching the '(' at open, or -1.
func closing(toks []token, open int) int {
	depth := 0
	for i := open; i < len(toks); i++ {
		switch {
		case toks[i].is('('):
			depth++
		case toks[i].is(')'):
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}
