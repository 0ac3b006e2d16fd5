package cli

import (
	"fmt"
	"testing"

	"github.com/redokit/redokit/apply"
)

// apply --help states the batch size the code uses (issue 27, item 7: it
// said 256 while apply.DefaultBatchRows is 1024).
func TestApplyHelpStatesTheBatchDefault(t *testing.T) {
	r := cli(t, "apply", "--help")
	wantCode(t, r, 0)
	mustContain(t, "apply --help", r.stdout, fmt.Sprintf("(default %d)", apply.DefaultBatchRows))
}
