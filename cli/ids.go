package cli

import (
	"fmt"
	"unicode/utf8"

	"github.com/redokit/redokit/segment"
)

// checkID is segment.ValidateID with the reason an operator needs: the
// character at fault whole (the library quotes its first byte, half of a
// multi-byte rune) and why "." and ".." are refused (it named no reason).
// The error still wraps segment.ErrInvalidName.
func checkID(id string) error {
	err := segment.ValidateID(id)
	if err == nil {
		return nil
	}
	if id == "." || id == ".." {
		return fmt.Errorf("%w: ID %q is a path's own or parent directory: on a local store the objects under it would land beside other logs' or outside the store", segment.ErrInvalidName, id)
	}
	for i, r := range id {
		if isIDRune(r) {
			continue
		}
		if _, size := utf8.DecodeRuneInString(id[i:]); r == utf8.RuneError && size == 1 {
			return fmt.Errorf("%w: ID %q has the byte 0x%02x, not UTF-8, at byte %d (allowed: A-Z a-z 0-9 . _ -)", segment.ErrInvalidName, id, id[i], i)
		}
		return fmt.Errorf("%w: ID %q has %q (U+%04X) at byte %d (allowed: A-Z a-z 0-9 . _ -)", segment.ErrInvalidName, id, r, r, i)
	}
	return err // empty, too long: the library's words say it
}

// isIDRune is segment's ID alphabet.
func isIDRune(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-'
}
