package sqlsink

import (
	"strconv"
	"testing"
)

// TestScratchSizeCountsEverything: the scratch memory a sink keeps for its
// next transaction is bounded by all it holds, not by its byte buffers
// alone: the ops of one commit ts of a million rows (one ApplyRows call)
// are not kept.
func TestScratchSizeCountsEverything(t *testing.T) {
	for name, sc := range map[string]txScratch{
		"ops":  {ops: make([]rowOp, 0, 1<<20)},
		"map":  {last: bigMap(1 << 20)},
		"args": {args: make([]any, 0, 1<<21)},
	} {
		if n := sc.size(); n <= maxScratchBytes {
			t.Errorf("scratch of big %s: %d bytes, at most the %d kept", name, n, maxScratchBytes)
		}
	}
	if n := (&txScratch{buf: make([]byte, 0, 4096)}).size(); n > maxScratchBytes {
		t.Errorf("a small scratch counts %d bytes", n)
	}
}

func bigMap(n int) map[string]int {
	m := make(map[string]int, n)
	for i := range n {
		m[strconv.Itoa(i)] = i
	}
	return m
}
