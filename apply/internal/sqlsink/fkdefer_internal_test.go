package sqlsink

import (
	"testing"

	"github.com/redokit/redokit/apply"
	"github.com/redokit/redokit/codec"
)

// TestDeferralReadsImagesByLength: an image is present when it has columns,
// as codec.RowChange.Op says, not when its slice is not nil. The reader's
// decoder hands an insert an empty, non-nil pre image once its event held
// one, and apply.Run's copies keep that; a parent's inserts must not count
// as rows it loses, which would defer the checks of a group that needs
// none.
func TestDeferralReadsImagesByLength(t *testing.T) {
	parent, child := apply.Table{Schema: "s", Name: "p"}, apply.Table{Schema: "s", Name: "c"}
	id := []codec.Column{{Name: "id", Value: codec.IntValue(1), Flags: codec.FlagPrimaryKey | codec.FlagHandleKey}}
	insert := &codec.RowChange{CommitTs: 10, Columns: id, PreColumns: []codec.Column{}}
	graph := map[apply.Table][]apply.Table{child: {parent}}
	groups := []apply.TableRows{{Table: parent, Rows: []*codec.RowChange{insert}}, {Table: child, Rows: []*codec.RowChange{insert}}}
	if deferral(groups, graph, false) {
		t.Fatal("inserts into a parent and its child defer the checks: an empty pre image was read as a row the parent loses")
	}
	del := &codec.RowChange{CommitTs: 10, PreColumns: id, Columns: []codec.Column{}}
	groups[0].Rows = []*codec.RowChange{del}
	if !deferral(groups, graph, false) {
		t.Fatal("a parent's delete beside its child's insert does not defer the checks")
	}
}
