package cli

import "testing"

func TestRangeSteps(t *testing.T) {
	if got := rangeSteps(100, 200, 150); got != rangeBarSteps/2 {
		t.Fatalf("rangeSteps(100, 200, 150) = %d", got)
	}
	if rangeSteps(100, 200, 50) != 0 || rangeSteps(100, 200, 300) != rangeBarSteps || rangeSteps(5, 5, 5) != 0 {
		t.Fatal("rangeSteps out of its range")
	}
}
