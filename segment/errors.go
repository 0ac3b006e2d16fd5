package segment

import (
	"errors"
	"fmt"
	"strconv"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrCorrupt matches every *CorruptionError.
	ErrCorrupt = errors.New("segment: corrupt")
	// ErrUnsupportedVersion matches every *VersionError.
	ErrUnsupportedVersion = errors.New("segment: unsupported format version")
	// ErrOutOfOrder is returned by Writer.Append for a commit ts below the
	// previous record's. The record is not written; the writer stays usable.
	ErrOutOfOrder = errors.New("segment: commit ts out of order")
	// ErrSealed is returned by a Writer after Seal.
	ErrSealed = errors.New("segment: writer is sealed")
	// ErrBuffered is returned by Writer.FooterCRC while records wait in the
	// open block: their frame, and so the footer, is not known until the
	// block is written.
	ErrBuffered = errors.New("segment: records are buffered in the open block")
)

// CorruptionError reports bytes that are not what a writer wrote: a failed
// CRC in a sealed segment, or in an unsealed one anywhere but its tail; a
// structure whose CRC holds but whose contents contradict the format; a sealed
// segment that is truncated or has bytes after its trailer.
type CorruptionError struct {
	Object string // the segment's name, when the caller gave one in the options
	Offset int64  // offset in the segment of the structure that failed
	Part   string // "header", "block", "progress", "footer", "trailer" or "segment"
	Detail string // what failed
}

func (e *CorruptionError) Error() string {
	return "segment" + object(e.Object) + ": corrupt " + e.Part + " at offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Detail
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// VersionError reports a segment (or trailer) whose magic is right but whose
// format version this build does not know.
type VersionError struct {
	Object  string
	Offset  int64 // 0 for the header, the trailer's offset for the trailer
	Version uint16
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("segment%s: unsupported format version %d at offset %d (this build reads versions %d to %d)",
		object(e.Object), e.Version, e.Offset, MinReadVersion, FormatVersion)
}

// Is makes errors.Is(err, ErrUnsupportedVersion) true.
func (e *VersionError) Is(target error) bool { return target == ErrUnsupportedVersion }

// IsCorrupt reports whether err is, or wraps, a corruption error.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

func object(name string) string {
	if name == "" {
		return ""
	}
	return " " + strconv.Quote(name)
}

func (p *problem) err(obj string) error {
	return &CorruptionError{Object: obj, Offset: p.off, Part: p.part, Detail: p.detail}
}

func ioErr(obj, op string, off int64, err error) error {
	return fmt.Errorf("segment%s: %s at offset %d: %w", object(obj), op, off, err)
}
