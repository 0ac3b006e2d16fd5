package pgddl

import (
	"strings"

	"github.com/redokit/redokit/apply/internal/mysqltok"
)

// viewWords are the words a view's body may use to be translated: a SELECT
// of columns from tables, joined, filtered by comparisons, grouped and
// ordered. Any other word is taken for a name, and any function but the
// aggregates here makes the view unsupported.
var viewWords = map[string]bool{
	"SELECT": true, "DISTINCT": true, "ALL": true, "FROM": true, "WHERE": true, "AND": true, "OR": true, "NOT": true,
	"AS": true, "JOIN": true, "INNER": true, "LEFT": true, "RIGHT": true, "OUTER": true, "CROSS": true, "ON": true,
	"IS": true, "NULL": true, "IN": true, "BETWEEN": true, "GROUP": true, "BY": true, "ORDER": true, "ASC": true,
	"DESC": true, "HAVING": true, "UNION": true, "CASE": true, "WHEN": true, "THEN": true, "ELSE": true, "END": true,
	"TRUE": true, "FALSE": true,
}

var viewFuncs = map[string]bool{"COUNT": true, "SUM": true, "MIN": true, "MAX": true, "AVG": true}

// viewRefused are MySQL words a body may use that would otherwise be taken
// for names: operators and clauses whose meaning differs or that are not
// translated.
var viewRefused = map[string]bool{
	"LIKE": true, "REGEXP": true, "RLIKE": true, "DIV": true, "MOD": true, "XOR": true, "LIMIT": true, "OFFSET": true,
	"INTERVAL": true, "BINARY": true, "COLLATE": true, "ESCAPE": true, "SOUNDS": true, "FOR": true, "LOCK": true,
	"SHARE": true, "WITH": true, "WINDOW": true, "OVER": true, "PARTITION": true, "USING": true, "NATURAL": true,
	"STRAIGHT_JOIN": true, "EXISTS": true, "ANY": true, "SOME": true, "DUAL": true, "INTO": true, "ROLLUP": true,
	"CURRENT_TIMESTAMP": true, "CURRENT_DATE": true, "CURRENT_TIME": true, "CURRENT_USER": true, "LOCALTIME": true,
	"LOCALTIMESTAMP": true, "UTC_TIMESTAMP": true, "UTC_DATE": true, "UTC_TIME": true, "DEFAULT": true, "VALUES": true,
	"EXCEPT": true, "INTERSECT": true, "LATERAL": true, "RECURSIVE": true, "MEMBER": true, "JSON_TABLE": true,
}

// createView: CREATE [OR REPLACE] [ALGORITHM=…] [DEFINER=…] [SQL SECURITY …]
// VIEW v [(cols)] AS select [WITH … CHECK OPTION], and ALTER VIEW likewise,
// as CREATE OR REPLACE VIEW when the body is trivially the same in
// PostgreSQL: names are quoted, unqualified tables get the DDL's schema.
func (r *rewriter) createView(toks []mysqltok.Token, i int) error {
	v, i, err := r.tableRef(toks, i)
	if err != nil {
		return err
	}
	cols := ""
	if i < len(toks) && toks[i].Is('(') {
		end := mysqltok.Closing(toks, i)
		if end < 0 {
			return unsupported("unbalanced parentheses")
		}
		var names []string
		for _, c := range mysqltok.SplitTop(toks[i+1 : end]) {
			if len(c) != 1 || !c[0].IsName() {
				return unsupported("view column list")
			}
			names = append(names, quote(c[0].Name()))
		}
		cols = " (" + strings.Join(names, ", ") + ")"
		i = end + 1
	}
	if i >= len(toks) || toks[i].Word() != "AS" {
		return unsupported("CREATE VIEW form")
	}
	body := toks[i+1:]
	if n := len(body); n >= 3 && body[n-1].Word() == "OPTION" && body[n-2].Word() == "CHECK" {
		// WITH [CASCADED|LOCAL] CHECK OPTION restricts writes through the
		// view, which the apply does not make.
		body = body[:n-2]
		if n := len(body); n > 0 && (body[n-1].Word() == "CASCADED" || body[n-1].Word() == "LOCAL") {
			body = body[:n-1]
		}
		if n := len(body); n > 0 && body[n-1].Word() == "WITH" {
			body = body[:n-1]
		}
	}
	s, err := r.viewBody(body)
	if err != nil {
		return err
	}
	r.emit("CREATE OR REPLACE VIEW " + v.sql() + cols + " AS " + s)
	return nil
}

func (r *rewriter) viewBody(toks []mysqltok.Token) (string, error) {
	if len(toks) == 0 || toks[0].Word() != "SELECT" {
		return "", unsupported("view body that is not a SELECT")
	}
	var out []string
	inFrom := false // after FROM or JOIN, where names are tables
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		w := t.Word()
		switch {
		case t.Kind == mysqltok.Word && t.Text[0] >= '0' && t.Text[0] <= '9':
			if !isDigits(t.Text) {
				return "", unsupported("view body literal %s", t.Text)
			}
			out = append(out, t.Text)
		case viewWords[w]:
			out = append(out, w)
			switch w {
			case "FROM", "JOIN":
				inFrom = true
			case "WHERE", "ON", "GROUP", "ORDER", "HAVING", "UNION", "SELECT":
				inFrom = false
			}
		case viewFuncs[w] && i+1 < len(toks) && toks[i+1].Is('('):
			out = append(out, w)
		case viewRefused[w] || t.Kind == mysqltok.Word && i+1 < len(toks) && toks[i+1].Is('('):
			return "", unsupported("view body %s", t.Text)
		case t.IsName():
			prev := ""
			if len(out) > 0 {
				prev = out[len(out)-1]
			}
			qualified := i+1 < len(toks) && toks[i+1].Is('.')
			if inFrom && !qualified && prev != "." && prev != "AS" && (prev == "FROM" || prev == "JOIN" || prev == ",") {
				tq, _, err := r.tableRef(toks, i)
				if err != nil {
					return "", err
				}
				out = append(out, tq.sql())
				continue
			}
			if err := checkName(t.Name()); err != nil {
				return "", err
			}
			out = append(out, quote(t.Name()))
		case t.Kind == mysqltok.String:
			if strings.ContainsRune(t.Text, '\\') {
				return "", unsupported("view body string with escapes")
			}
			out = append(out, literal(mysqltok.Unquote(t.Text)))
		case t.Kind == mysqltok.Punct && strings.ContainsRune(",.()*=<>+-/", rune(t.Text[0])):
			// <>, <= and >= come as two tokens.
			if n := len(out); n > 0 && (t.Is('>') || t.Is('=')) && (out[n-1] == "<" || out[n-1] == ">") && toks[i-1].Kind == mysqltok.Punct {
				out[n-1] += t.Text
				continue
			}
			out = append(out, t.Text)
		default:
			return "", unsupported("view body token %q", t.Text)
		}
	}
	// Spaces around everything but the dots of qualified names.
	var b strings.Builder
	for i, s := range out {
		if i > 0 && s != "." && out[i-1] != "." {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	return b.String(), nil
}
