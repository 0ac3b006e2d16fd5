package blob

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key (prefix included) a Bucket accepts, in bytes:
// the limit of S3 and GCS.
const MaxKeyLen = 1024

// ValidateKey reports why key is not a portable object key, or nil. A
// portable key is non-empty valid UTF-8 of at most MaxKeyLen bytes with no
// control characters (NUL included), does not start or end with "/", and has
// no empty, "." or ".." segment. The segment rules keep keys from escaping a
// local backend's root and from aliasing on stores that map keys to paths
// (where "a//b" and "a/./b" name the same object as "a/b").
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, key)
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("%w: key %q is absolute", ErrInvalidKey, key)
	case strings.HasSuffix(key, "/"):
		return fmt.Errorf("%w: key %q ends with /", ErrInvalidKey, key)
	}
	for i, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: key %q has control character %U at byte %d", ErrInvalidKey, key, r, i)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: key %q has an empty segment", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: key %q has a %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}

// validatePrefix accepts "" or a prefix that, completed with any valid key,
// stays valid: the same rules as a key, except that it may end with "/".
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidateKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	return nil
}
