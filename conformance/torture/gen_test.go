package torture

import (
	"testing"

	"github.com/redokit/redokit/codec"
)

// TestGenDDLListsItsTables: every DDL of the upstream lists each physical
// table it touches in Tables (docs/FORMAT.md, DDL body), with the named
// table among them, and passes the codec's check.
func TestGenDDLListsItsTables(t *testing.T) {
	ddls := 0
	for _, seed := range []uint64{1, 2, 25} {
		g := Gen{Seed: seed}
		for span := uint64(0); span < 8; span++ {
			for ts := uint64(BaseTs + 1); ts <= BaseTs+400; ts++ {
				for _, ev := range g.Events(span, ts) {
					if !ev.IsDDL() {
						continue
					}
					ddls++
					if err := codec.CheckEvent(&ev); err != nil {
						t.Fatalf("seed %d span %d ts %d: %v", seed, span, ts, err)
					}
					d := ev.DDL
					if d.Type != codec.ActionAddColumn {
						t.Fatalf("seed %d span %d ts %d: action %v: this test knows ADD COLUMN only", seed, span, ts, d.Type)
					}
					if len(d.Tables) != 1 || d.Tables[0].TableName != d.Table || d.Tables[0].Role != codec.RoleAffected {
						t.Fatalf("seed %d span %d ts %d: %q names %+v and lists %+v, want it listed affected", seed, span, ts, d.Query, d.Table, d.Tables)
					}
				}
			}
		}
	}
	if ddls == 0 {
		t.Fatal("no DDL generated")
	}
}
