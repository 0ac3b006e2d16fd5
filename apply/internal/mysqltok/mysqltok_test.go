package mysqltok

import (
	"reflect"
	"strings"
	"testing"
)

func TestTokenize(t *testing.T) {
	sp := func(s string) Token { return Token{Kind: Space, Text: s} }
	w := func(s string) Token { return Token{Kind: Word, Text: s} }
	id := func(s string) Token { return Token{Kind: Ident, Text: s} }
	str := func(s string) Token { return Token{Kind: String, Text: s} }
	p := func(s string) Token { return Token{Kind: Punct, Text: s} }
	cases := []struct {
		in   string
		want []Token
	}{
		{"", nil},
		{"CREATE  TABLE\tt\r\n(", []Token{w("CREATE"), sp("  "), w("TABLE"), sp("\t"), w("t"), sp("\r\n"), p("(")}},
		// Quotes: the kind by the quote character (a double-quoted text is a
		// string, as in MySQL's default sql_mode), the text as written.
		{"`a b` \"c\" 'd'", []Token{id("`a b`"), sp(" "), str(`"c"`), sp(" "), str("'d'")}},
		// Doubled quotes stay inside; a quote of another kind is a plain byte.
		{"'it''s' `x``y` \"q\"\"r\" 'a\"b`c'", []Token{str("'it''s'"), sp(" "), id("`x``y`"), sp(" "), str(`"q""r"`), sp(" "), str("'a\"b`c'")}},
		// A backslash escapes the next byte in '' and "", not in ``.
		{`'a\'b' "c\"d" 'e\\'`, []Token{str(`'a\'b'`), sp(" "), str(`"c\"d"`), sp(" "), str(`'e\\'`)}},
		{"`a\\` b", []Token{id("`a\\`"), sp(" "), w("b")}},
		// Comments are one space each; the line feed after a line comment
		// is its own space.
		{"a# x 'y\nb", []Token{w("a"), sp(" "), sp("\n"), w("b")}},
		{"a-- x\nb", []Token{w("a"), sp(" "), sp("\n"), w("b")}},
		{"a/* x ' */b", []Token{w("a"), sp(" "), w("b")}},
		{"a /*!50100 PARTITION BY HASH(a) */", []Token{w("a"), sp(" "), sp(" ")}},
		{"a /*T![clustered_index] CLUSTERED */,", []Token{w("a"), sp(" "), sp(" "), p(",")}},
		// "--" without a space after it is two dashes, as in MySQL.
		{"a--b", []Token{w("a"), p("-"), p("-"), w("b")}},
		// Words: letters, digits, _, $ and every byte from 0x80; a number
		// with a point is three tokens.
		{"$a_1 é.x 1.50 -2", []Token{w("$a_1"), sp(" "), w("é"), p("."), w("x"), sp(" "), w("1"), p("."), w("50"), sp(" "), p("-"), w("2")}},
		// A quote inside a comment, a comment inside a quote.
		{"'/* x' #'\n", []Token{str("'/* x'"), sp(" "), sp(" "), sp("\n")}},
	}
	for _, c := range cases {
		got, err := Tokenize(c.in)
		// Each token's offset is where its text is in the input (a
		// comment's, where the comment starts), in increasing order.
		for i, tk := range got {
			comment := tk.Kind == Space && tk.Text == " " && c.in[tk.Off] != ' '
			if i > 0 && tk.Off <= got[i-1].Off || !comment && !strings.HasPrefix(c.in[tk.Off:], tk.Text) {
				t.Errorf("Tokenize(%q): token %d %q at offset %d", c.in, i, tk.Text, tk.Off)
			}
		}
		for i := range got {
			got[i].Off = 0
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Tokenize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	// SQLite's and PostgreSQL's own text quotes identifiers in "".
	in := `CREATE INDEX "a.""q" ON "t" ('x', "c")`
	got, err := TokenizeANSI(in)
	if err != nil {
		t.Fatal(err)
	}
	s := Solid(got)
	if s[2].Kind != Ident || s[2].Name() != `a."q` || s[4].Kind != Ident || s[6].Kind != String || s[8].Name() != "c" {
		t.Errorf("TokenizeANSI(%q) = %q", in, s)
	}
}

// TestUnquote: the value of a string token, whichever its quotes.
func TestUnquote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`''`, ""},
		{`'it''s'`, "it's"},
		{`"say ""hi"""`, `say "hi"`},
		{`'a"b'`, `a"b`},
		{`"a'b"`, `a'b`},
		{`'a\'b\"c\\d'`, `a'b"c\d`},
		{`'\0\b\n\r\t\Z'`, "\x00\b\n\r\t\x1a"},
		{`'\%\_\q'`, `\%\_q`},
	} {
		if got := Unquote(c.in); got != c.want {
			t.Errorf("Unquote(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTokenizeUnterminated(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{"'abc", "unterminated quote '"},
		{`"abc`, `unterminated quote "`},
		{"`abc", "unterminated quote `"},
		{`'abc\'`, "unterminated quote '"}, // the escaped quote does not close
		{`'abc\`, "unterminated quote '"},  // nor does a backslash at the end
		{"'abc''", "unterminated quote '"}, // nor a doubled quote
		{"a /* b", "unterminated comment"},
		{"a /* b */ /*", "unterminated comment"},
	} {
		toks, err := Tokenize(c.in)
		if err == nil || err.Error() != c.err {
			t.Errorf("Tokenize(%q) = %q, %v; want error %q", c.in, toks, err, c.err)
		}
	}
}

// TestJoinRoundTrip: the tokens give back their input, comments aside.
func TestJoinRoundTrip(t *testing.T) {
	in := "CREATE TABLE `t``1` (\n  a INT DEFAULT 'x''y\\'z',\n  \"b\" TEXT\n) ;"
	toks, err := Tokenize(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := Join(toks); got != in {
		t.Errorf("Join = %q, want %q", got, in)
	}
	toks, _ = Tokenize("  a /* c */ b  ")
	if got := Join(toks); got != "a   b" {
		t.Errorf("Join with a comment = %q", got)
	}
}

func TestTokenMethods(t *testing.T) {
	toks, err := Tokenize("create `a``b` \"c\"\"d\" 'e' ( x")
	if err != nil {
		t.Fatal(err)
	}
	s := Solid(toks)
	var words, names []string
	var isName []bool
	for _, tk := range s {
		words = append(words, tk.Word())
		names = append(names, tk.Name())
		isName = append(isName, tk.IsName())
	}
	if want := []string{"CREATE", "", "", "", "", "X"}; !reflect.DeepEqual(words, want) {
		t.Errorf("Word = %q, want %q", words, want)
	}
	if want := []string{"create", "a`b", "", "", "", "x"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Name = %q, want %q", names, want)
	}
	if want := []bool{true, true, false, false, false, true}; !reflect.DeepEqual(isName, want) {
		t.Errorf("IsName = %v, want %v", isName, want)
	}
	if !s[4].Is('(') || s[4].Is(')') || s[3].Is('\'') {
		t.Errorf("Is: %q", s)
	}
}

func TestHelpers(t *testing.T) {
	toks, err := Tokenize("ALTER TABLE t ADD c DECIMAL(10, 2), DROP d , ADD KEY k (a, b);; ")
	if err != nil {
		t.Fatal(err)
	}
	s := Solid(toks)
	if s[len(s)-1].Is(';') {
		t.Errorf("Solid kept a trailing ';': %q", s)
	}
	for _, tk := range s {
		if tk.Kind == Space {
			t.Errorf("Solid kept a space: %q", s)
		}
	}
	if !Words(s, "ALTER", "TABLE") || Words(s, "ALTER", "VIEW") || Words(s[:1], "ALTER", "TABLE") || !Words(s) {
		t.Error("Words")
	}
	var parts []string
	for _, part := range SplitTop(s[3:]) {
		parts = append(parts, Spaced(part)) // a space before "(", none after it or before "," and ")"
	}
	if want := []string{"ADD c DECIMAL (10, 2)", "DROP d", "ADD KEY k (a, b)"}; !reflect.DeepEqual(parts, want) {
		t.Errorf("SplitTop+Spaced = %q, want %q", parts, want)
	}
	if got := Spaced(Solid(mustTokenize(t, "s . t(a.b)"))); got != "s.t (a.b)" {
		t.Errorf("Spaced = %q", got)
	}
	open := 6 // the '(' after DECIMAL
	if !s[open].Is('(') {
		t.Fatalf("token %d is %q", open, s[open].Text)
	}
	if e := Closing(s, open); e != 10 || !s[e].Is(')') {
		t.Errorf("Closing = %d", e)
	}
	if e := Closing(Solid(mustTokenize(t, "((a)")), 0); e != -1 {
		t.Errorf("Closing of an unclosed '(' = %d", e)
	}
	nested := Solid(mustTokenize(t, "(a, (b, c)), d"))
	if e := Closing(nested, 0); e != len(nested)-3 {
		t.Errorf("Closing over a nested pair = %d", e)
	}
	if got := SplitTop(nil); len(got) != 1 || len(got[0]) != 0 {
		t.Errorf("SplitTop(nil) = %q", got)
	}
}

func mustTokenize(t *testing.T, s string) []Token {
	t.Helper()
	toks, err := Tokenize(s)
	if err != nil {
		t.Fatalf("Tokenize(%q): %v", s, err)
	}
	return toks
}

// TestUTF8: bytes from 0x80 are word bytes, so a multi-byte letter never
// splits and never becomes punctuation.
func TestUTF8(t *testing.T) {
	s := Solid(mustTokenize(t, "`日本` 名前_1,ü"))
	if len(s) != 4 || s[0].Name() != "日本" || s[1].Text != "名前_1" || !s[2].Is(',') || s[3].Text != "ü" {
		t.Errorf("%q", s)
	}
	if strings.Contains(Spaced(s), "\uFFFD") {
		t.Errorf("Spaced split a character: %q", Spaced(s))
	}
}

func TestKeyPart(t *testing.T) {
	for _, c := range []struct {
		in, name, order string
		ok              bool
	}{
		{"a", "a", "", true},
		{"`b c`(10)", "b c", "", true},
		{"d DESC", "d", "DESC", true},
		{"e(4) ASC", "e", "ASC", true},
		{"(a + 1)", "", "", false},
		{"f COLLATE x", "", "", false},
	} {
		toks, err := Tokenize(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if name, order, ok := KeyPart(Solid(toks)); name != c.name || order != c.order || ok != c.ok {
			t.Errorf("KeyPart(%s) = %q, %q, %v; want %q, %q, %v", c.in, name, order, ok, c.name, c.order, c.ok)
		}
	}
}
