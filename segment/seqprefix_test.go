package segment

import (
	"strings"
	"testing"
)

// TestSeqPrefix: the prefix of a seq is the start of both its names, and of
// no name of a neighbouring seq or epoch.
func TestSeqPrefix(t *testing.T) {
	p := SeqPrefix("log", "w", 3, 7)
	if want := "log/seg/w/00000000000000000003-00000000000000000007"; p != want {
		t.Fatalf("SeqPrefix = %q, want %q", p, want)
	}
	active := Name{LogID: "log", WriterID: "w", Epoch: 3, Seq: 7, Active: true}
	sealed := Name{LogID: "log", WriterID: "w", Epoch: 3, Seq: 7, MinTs: 1, MaxTs: 9}
	for _, n := range []Name{active, sealed} {
		if !strings.HasPrefix(n.Format(), p) {
			t.Errorf("%s does not begin with %s", n.Format(), p)
		}
	}
	for _, n := range []Name{
		{LogID: "log", WriterID: "w", Epoch: 3, Seq: 70, Active: true},
		{LogID: "log", WriterID: "w", Epoch: 3, Seq: 8, MinTs: 1, MaxTs: 9},
		{LogID: "log", WriterID: "w", Epoch: 4, Seq: 7, Active: true},
		{LogID: "log", WriterID: "w2", Epoch: 3, Seq: 7, Active: true},
	} {
		if strings.HasPrefix(n.Format(), p) {
			t.Errorf("%s, of another seq, begins with %s", n.Format(), p)
		}
	}
	// The sealed pattern a missing segment is reported under.
	if got, want := p+"-*"+SealedExt, "log/seg/w/00000000000000000003-00000000000000000007-*.seg"; got != want {
		t.Errorf("pattern %q, want %q", got, want)
	}
}
