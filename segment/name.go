package segment

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/redokit/redokit/internal/layout"
)

// ErrInvalidName matches the errors of ParseName, Name.Validate and
// ValidateID.
var ErrInvalidName = errors.New("segment: invalid name")

// Name parts.
const (
	// SealedExt ends the name of a sealed segment.
	SealedExt = ".seg"
	// ActiveExt ends the name of an active (unsealed, still appended)
	// local segment.
	ActiveExt = ".active"
	// numWidth is the width of every number in a name: enough decimal
	// digits for any uint64.
	numWidth = 20
)

// Name is a segment's object key, parsed: everything a reader or the GC needs
// to select segments from a listing alone, without reading them.
//
// The key of a sealed segment is
//
//	<log ID>/seg/<writer ID>/<epoch>-<seq>-<min ts>-<max ts>.seg
//
// and that of an active one, whose max ts is not known yet,
//
//	<log ID>/seg/<writer ID>/<epoch>-<seq>.active
//
// where every number is 20 decimal digits, zero-padded. Because the widths are
// fixed, the byte order of the keys of one writer is (epoch, seq) order: a
// writer's new epoch sorts after everything its previous epochs wrote even if
// it starts its sequence over, and an active segment sorts right after the
// sealed segments of its own (epoch, seq) and before the next seq. Every key
// sits at the same depth, under a directory that holds only keys, so no key is
// a prefix-directory of another.
type Name struct {
	LogID    string
	WriterID string
	Epoch    uint64
	Seq      uint64
	MinTs    uint64 // commit ts of the first record; 0 in an active name
	MaxTs    uint64 // commit ts of the last record; 0 in an active name
	Active   bool   // an unsealed local segment
}

// ValidateID reports why id cannot be a log ID or writer ID, or nil. An ID is
// 1 to MaxIDLen bytes of ASCII letters, digits, '.', '_' and '-', and is not
// "." or "..". The set keeps an ID one key element on every store and file
// system, free of the separators a name is parsed by ('/'), and readable in a
// listing.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: empty ID", ErrInvalidName)
	case len(id) > MaxIDLen:
		return fmt.Errorf("%w: ID %q is %d bytes, longer than %d", ErrInvalidName, id, len(id), MaxIDLen)
	case id == "." || id == "..":
		return fmt.Errorf("%w: ID %q", ErrInvalidName, id)
	}
	for i := 0; i < len(id); i++ {
		if !idChar(id[i]) {
			// The character, not its first byte: byte 0xc3 of "é" would
			// print as 'Ã'.
			what := fmt.Sprintf("byte %#02x", id[i])
			if r, _ := utf8.DecodeRuneInString(id[i:]); r != utf8.RuneError {
				what = fmt.Sprintf("%q", r)
			}
			return fmt.Errorf("%w: ID %q has %s at byte %d (allowed: A-Z a-z 0-9 . _ -)", ErrInvalidName, id, what, i)
		}
	}
	return nil
}

func idChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Validate reports why n cannot be formatted into a name that parses back to
// n, or nil.
func (n Name) Validate() error {
	if err := ValidateID(n.LogID); err != nil {
		return fmt.Errorf("log ID: %w", err)
	}
	if err := ValidateID(n.WriterID); err != nil {
		return fmt.Errorf("writer ID: %w", err)
	}
	if n.Active && (n.MinTs != 0 || n.MaxTs != 0) {
		return fmt.Errorf("%w: an active name has no ts range, got [%d, %d]", ErrInvalidName, n.MinTs, n.MaxTs)
	}
	if n.MinTs > n.MaxTs {
		return fmt.Errorf("%w: min ts %d exceeds max ts %d", ErrInvalidName, n.MinTs, n.MaxTs)
	}
	return nil
}

// Format returns the key of n. It does not validate n: a Name from ParseName
// or one that passes Validate formats into a key that parses back to it.
func (n Name) Format() string {
	return layout.WriterSegments(n.LogID, n.WriterID) + n.Base()
}

// Base returns the last element of the key of n.
func (n Name) Base() string {
	b := make([]byte, 0, 4*numWidth+3+len(SealedExt))
	b = appendPadded(b, n.Epoch)
	b = append(b, '-')
	b = appendPadded(b, n.Seq)
	if n.Active {
		return string(append(b, ActiveExt...))
	}
	b = append(b, '-')
	b = appendPadded(b, n.MinTs)
	b = append(b, '-')
	b = appendPadded(b, n.MaxTs)
	return string(append(b, SealedExt...))
}

func (n Name) String() string { return n.Format() }

func appendPadded(b []byte, v uint64) []byte {
	var d [numWidth]byte
	for i := numWidth - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:]...)
}

// ParseName parses a segment key made by Name.Format. It accepts exactly the
// keys Format makes: any other string, including one with a number of another
// width, is an error wrapping ErrInvalidName.
func ParseName(key string) (Name, error) {
	var n Name
	bad := func(format string, args ...any) (Name, error) {
		return Name{}, fmt.Errorf("%w: %q: %s", ErrInvalidName, key, fmt.Sprintf(format, args...))
	}
	parts := strings.Split(key, "/")
	if len(parts) != 4 {
		return bad("want 4 elements <log>/%s/<writer>/<name>, got %d", layout.SegmentDir, len(parts))
	}
	if parts[1] != layout.SegmentDir {
		return bad("second element is %q, not %q", parts[1], layout.SegmentDir)
	}
	if err := ValidateID(parts[0]); err != nil {
		return bad("log ID: %v", err)
	}
	if err := ValidateID(parts[2]); err != nil {
		return bad("writer ID: %v", err)
	}
	n.LogID, n.WriterID = parts[0], parts[2]
	base := parts[3]
	var nums []uint64
	switch {
	case strings.HasSuffix(base, SealedExt):
		nums = make([]uint64, 4)
		base = strings.TrimSuffix(base, SealedExt)
	case strings.HasSuffix(base, ActiveExt):
		nums = make([]uint64, 2)
		base = strings.TrimSuffix(base, ActiveExt)
		n.Active = true
	default:
		return bad("name ends with neither %s nor %s", SealedExt, ActiveExt)
	}
	if want := len(nums)*(numWidth+1) - 1; len(base) != want {
		return bad("want %d numbers of %d digits joined by '-', got %q", len(nums), numWidth, base)
	}
	for i := range nums {
		field := base[i*(numWidth+1):][:numWidth]
		if i > 0 && base[i*(numWidth+1)-1] != '-' {
			return bad("number %d is not preceded by '-'", i+1)
		}
		v, ok := parsePadded(field)
		if !ok {
			return bad("%q is not a %d-digit number below 2^64", field, numWidth)
		}
		nums[i] = v
	}
	n.Epoch, n.Seq = nums[0], nums[1]
	if !n.Active {
		n.MinTs, n.MaxTs = nums[2], nums[3]
		if n.MinTs > n.MaxTs {
			return bad("min ts %d exceeds max ts %d", n.MinTs, n.MaxTs)
		}
	}
	return n, nil
}

// parsePadded parses exactly numWidth decimal digits that fit a uint64.
func parsePadded(s string) (uint64, bool) {
	if len(s) != numWidth {
		return 0, false
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// Check reports whether a segment found under the key object, which parses to
// n, holds what n says: the header's log, writer, epoch and seq, and for a
// sealed name the footer's min and max commit ts (f is the footer; nil when
// the segment is read unsealed, and then only the header is compared). An
// empty sealed segment is named with min and max ts 0, as its footer says. A
// mismatch is a *CorruptionError naming object: a segment copied or renamed
// to another key would be ordered, fenced, chained and collected as
// something it is not.
func (n Name) Check(object string, h Header, f *Footer) error {
	if h.LogID != n.LogID || h.WriterID != n.WriterID || h.Epoch != n.Epoch || h.Seq != n.Seq {
		return &CorruptionError{Object: object, Part: "header",
			Detail: fmt.Sprintf("header names log %q writer %q epoch %d seq %d, the key log %q writer %q epoch %d seq %d",
				h.LogID, h.WriterID, h.Epoch, h.Seq, n.LogID, n.WriterID, n.Epoch, n.Seq)}
	}
	if f == nil || n.Active {
		return nil
	}
	if f.MinTs != n.MinTs || f.MaxTs != n.MaxTs {
		off := int64(HeaderSize)
		if k := len(f.Blocks); k > 0 {
			off = f.Blocks[k-1].End()
		}
		return &CorruptionError{Object: object, Offset: off, Part: "footer",
			Detail: fmt.Sprintf("ts range [%d, %d] disagrees with the key's [%d, %d]", f.MinTs, f.MaxTs, n.MinTs, n.MaxTs)}
	}
	return nil
}
