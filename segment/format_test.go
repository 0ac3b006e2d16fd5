package segment

import (
	"testing"
)

// TestCRCVector pins the CRC the spec names: CRC-32C, unmasked.
func TestCRCVector(t *testing.T) {
	if got := crc([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("CRC-32C check value %#08x, want 0xe3069283", got)
	}
}
