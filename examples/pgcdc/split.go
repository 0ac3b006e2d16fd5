package main

import (
	"fmt"
	"strings"
)

// splitStatements splits the text a client sent in one message into its
// statements: the event triggers record that whole text (current_query())
// for each DDL statement of it, so a migration sent as one string reaches the
// capture once per statement, each time whole. It splits at the semicolons
// outside string literals ('…' with ” inside, E'…' with backslash escapes,
// $tag$…$tag$), quoted identifiers ("…" with "" inside), comments (-- to the
// end of the line, and /* */, which nest in PostgreSQL) and parentheses, as
// psql does. Statements holding nothing but space and comments are left out;
// the others are returned as written, trimmed. An unterminated literal,
// identifier or comment is an error.
func splitStatements(sql string) ([]string, error) {
	m, err := mask(sql, true)
	if err != nil {
		return nil, err
	}
	var out []string
	depth, start := 0, 0
	add := func(end int) {
		if strings.TrimSpace(m[start:end]) != "" {
			out = append(out, strings.TrimSpace(sql[start:end]))
		}
		start = end + 1
	}
	for i := 0; i < len(m); i++ {
		switch m[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		case ';':
			if depth == 0 {
				add(i)
			}
		}
	}
	add(len(m))
	return out, nil
}

// stmtTag is the command tag PostgreSQL gives a statement (TG_TAG in an
// event trigger), for the statements the capture translates: CREATE TABLE
// (also TEMP, UNLOGGED…; CREATE TABLE AS when it has a query), ALTER TABLE,
// DROP TABLE. Any other statement gets its first words, which match no tag
// the capture carries.
func stmtTag(stmt string) string {
	m, err := mask(stmt, true)
	if err != nil {
		return ""
	}
	// The words outside parentheses: "as" there is CREATE TABLE AS.
	var words []string
	depth, w := 0, -1
	m = strings.ToLower(m) + " "
	for i := 0; i < len(m); i++ {
		c := m[i]
		if identByte(c) {
			if w < 0 {
				w = i
			}
			continue
		}
		if w >= 0 && depth == 0 {
			words = append(words, m[w:i])
		}
		w = -1
		switch c {
		case '(':
			depth++
		case ')':
			depth = max(depth-1, 0)
		}
	}
	if len(words) == 0 {
		return ""
	}
	switch words[0] {
	case "create":
		i := 1
		for i < len(words) && (words[i] == "or" || words[i] == "replace" || words[i] == "temp" || words[i] == "temporary" ||
			words[i] == "unlogged" || words[i] == "global" || words[i] == "local") {
			i++
		}
		if i < len(words) && words[i] == "table" {
			for _, w := range words[i+1:] {
				if w == "as" {
					return "CREATE TABLE AS"
				}
			}
			return "CREATE TABLE"
		}
		if i < len(words) {
			return "CREATE " + strings.ToUpper(words[i])
		}
	case "alter", "drop":
		if len(words) > 1 {
			return strings.ToUpper(words[0] + " " + words[1])
		}
	}
	return strings.ToUpper(words[0])
}

// mask returns sql with every comment turned into spaces and, with literals,
// every string literal, dollar-quoted string and quoted identifier into '#'
// (so that its text cannot look like a keyword or a semicolon); byte
// offsets are kept.
func mask(sql string, literals bool) (string, error) {
	b := []byte(sql)
	fill := func(from, to int, c byte) {
		for k := from; k < to; k++ {
			if b[k] != '\n' {
				b[k] = c
			}
		}
	}
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == '-' && strings.HasPrefix(sql[i:], "--"):
			j := strings.IndexByte(sql[i:], '\n')
			if j < 0 {
				j = len(sql) - i
			}
			fill(i, i+j, ' ')
			i += j
		case c == '/' && strings.HasPrefix(sql[i:], "/*"):
			depth, j := 0, i
			for {
				if j >= len(sql) {
					return "", fmt.Errorf("an unterminated /* comment at offset %d", i)
				}
				if strings.HasPrefix(sql[j:], "/*") {
					depth, j = depth+1, j+2
				} else if strings.HasPrefix(sql[j:], "*/") {
					depth, j = depth-1, j+2
					if depth == 0 {
						break
					}
				} else {
					j++
				}
			}
			fill(i, j, ' ')
			i = j
		case c == '\'':
			// E'…' (or e'…') takes backslash escapes; a standard string
			// does not (standard_conforming_strings, on by default).
			esc := i > 0 && (sql[i-1] == 'e' || sql[i-1] == 'E') && (i == 1 || !identByte(sql[i-2]))
			j := i + 1
			for ; ; j++ {
				if j >= len(sql) {
					return "", fmt.Errorf("an unterminated string literal at offset %d", i)
				}
				if esc && sql[j] == '\\' {
					j++
					continue
				}
				if sql[j] == '\'' {
					if j+1 < len(sql) && sql[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if literals {
				fill(i, j+1, '#')
			}
			i = j + 1
		case c == '"':
			j := i + 1
			for ; ; j++ {
				if j >= len(sql) {
					return "", fmt.Errorf("an unterminated quoted identifier at offset %d", i)
				}
				if sql[j] == '"' {
					if j+1 < len(sql) && sql[j+1] == '"' {
						j++
						continue
					}
					break
				}
			}
			if literals {
				fill(i, j+1, '#')
			}
			i = j + 1
		case c == '$' && (i == 0 || !identByte(sql[i-1])):
			tag, ok := dollarTag(sql[i:])
			if !ok {
				i++ // a parameter ($1) or a stray $
				continue
			}
			end := strings.Index(sql[i+len(tag):], tag)
			if end < 0 {
				return "", fmt.Errorf("an unterminated dollar-quoted string %s at offset %d", tag, i)
			}
			j := i + len(tag) + end + len(tag)
			if literals {
				fill(i, j, '#')
			}
			i = j
		default:
			i++
		}
	}
	return string(b), nil
}

// dollarTag returns the opening $tag$ s starts with.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1], true
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || j > 1 && c >= '0' && c <= '9':
		default:
			return "", false
		}
	}
	return "", false
}

func identByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
