package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"
)

// FormatVersion is the segment format version this package writes. Any
// change an older reader could misread bumps it. Version 4 added the
// committed ts to the progress frame and the flags byte to the header (an
// epoch's blocks may hold events staged above its committed ts, which a
// version-3 reader would take for committed); version 3 added the progress
// frame; version 2 added the chain link to the header. Readers read
// versions MinReadVersion to FormatVersion (a version-2 segment is one without
// progress frames); version 1 was never released and is refused with a
// *VersionError like any other unknown version.
const FormatVersion = 4

// MinReadVersion is the oldest format version this package reads.
const MinReadVersion = 2

// versionSupported reports whether this package reads version v.
func versionSupported(v uint16) bool { return v >= MinReadVersion && v <= FormatVersion }

// Sizes of the fixed parts of a segment.
const (
	HeaderSize      = 196 // segment header, CRC included
	BlockHeaderSize = 40  // block frame header, CRC included
	IndexEntrySize  = 40  // one block's entry in the footer index
	FooterFixedSize = 56  // footer before its index entries
	TrailerSize     = 28  // fixed-size trailer that ends a sealed segment
	footerCRCSize   = 4
	minFooterSize   = FooterFixedSize + footerCRCSize
	minRecordSize   = 3 // ts delta, kind, payload length: one byte each at least
)

// MaxBlockSize bounds the uncompressed size of one block, and therefore what a
// reader allocates for any length it reads from input. 64 MiB is far above the
// default target and far below what a corrupt 32-bit length could ask for.
const MaxBlockSize = 64 << 20

// MaxRecordSize is the largest payload one record can carry: a record is never
// split across blocks, and a block holding only that record (ts delta 0, kind,
// a 4-byte length) must fit MaxBlockSize.
const MaxRecordSize = MaxBlockSize - 1 - 1 - 4

// DefaultBlockSize is the target uncompressed size of a block when
// WriterOptions.BlockSize is zero. Large enough for lz4 to find repeats across
// many rows of one table, small enough that a reader seeking by ts decodes
// little it will throw away.
const DefaultBlockSize = 256 << 10

// MaxIDLen is the longest log ID or writer ID, in bytes.
const MaxIDLen = 64

// Magic numbers. The first byte has its high bit set and the last is '\n',
// as in PNG, so that a transfer that strips the eighth bit or rewrites line
// ends is caught by the first check rather than by a CRC far into the file.
var (
	headerMagic  = [8]byte{0x89, 'R', 'D', 'K', 'S', 'E', 'G', '\n'}
	trailerMagic = [8]byte{0x89, 'R', 'D', 'K', 'E', 'N', 'D', '\n'}
)

// Frame types: the first byte of every frame after the header, so a streaming
// reader knows whether a block, a progress frame or the footer comes next.
const (
	frameBlock    = 1
	frameFooter   = 2
	frameProgress = 3 // format version 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var le = binary.LittleEndian

// Compression names how blocks are compressed. In the segment header it is the
// writer's policy; in a block header it is what that block actually holds
// (an lz4 writer stores a block raw when lz4 does not make it smaller).
type Compression uint8

// Compression values, as stored.
const (
	CompressionNone Compression = 0
	CompressionLZ4  Compression = 1
)

func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionLZ4:
		return "lz4"
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

func (c Compression) valid() bool { return c == CompressionNone || c == CompressionLZ4 }

// Kind is the kind of a record: what the payload encodes.
type Kind uint8

// Record kinds, as stored.
const (
	KindRow Kind = 1 // a row change
	KindDDL Kind = 2 // a DDL
)

func (k Kind) String() string {
	switch k {
	case KindRow:
		return "row"
	case KindDDL:
		return "ddl"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k == KindRow || k == KindDDL }

// Header is the segment header: who wrote the segment and how its blocks are
// compressed. It is written once, at offset 0, before any block.
type Header struct {
	// Version is the format version. Readers fill it in; NewWriter accepts
	// 0 (meaning FormatVersion) or FormatVersion, and ResumeWriter also
	// MinReadVersion, to finish a segment an older build started.
	Version     uint16
	LogID       string // the log (changefeed) the segment belongs to; see ValidateID
	WriterID    string // the writer that wrote it; see ValidateID
	Epoch       uint64 // the writer's epoch when it wrote the segment, ≥ 1
	Seq         uint64 // the segment's sequence number within the writer, ≥ 1
	Compression Compression
	// Created is when the writer created the segment, stored with nanosecond
	// precision as Unix time. Writers fill in time.Now() when it is zero.
	Created time.Time
	// Link ties the segment to its predecessor in its writer epoch's chain.
	// Writers set it; readers fill it in.
	Link Link
	// Flags say how the writer came to write the segment (version 4; zero
	// in older versions). FlagCatchUp is what readers act on.
	Flags Flags
	// CRC is the header's CRC field: the segment's digest, which its
	// successor's Link.PrevHeaderCRC and a published progress's Digest
	// repeat. Readers fill it in, and so does a Writer once it has encoded
	// the header (Writer.Header); a writer ignores it in what it is given.
	CRC uint32
}

// Flags is the header's flags byte.
type Flags uint8

const (
	// FlagStaged marks a segment begun for events staged above the
	// writer's committed ts (a flush cut before the resolved ts covered
	// them, to bound memory). Informational: the committed ts decides what
	// is part of the log.
	FlagStaged Flags = 1 << 0
	// FlagCatchUp marks a segment that may hold copies of events another
	// segment of the same writer epoch holds too (events at or below the
	// epoch's committed ts when they were cut: a span added behind the
	// writer, or re-added after its staged events were written). Readers
	// drop duplicates across segments of one epoch only where one of them
	// carries it.
	FlagCatchUp Flags = 1 << 1

	knownFlags = FlagStaged | FlagCatchUp
)

// Link ties a segment to its predecessor in its writer epoch's chain: within
// one epoch a writer's segments have consecutive seqs, and each names the one
// before it, so a reader holding the last segment of a chain (or the digest a
// writer published for it) can prove that no segment before it is missing or
// was replaced.
type Link struct {
	// PrevSeq is the predecessor's seq, always the segment's own seq - 1;
	// 0 when the segment is the first its epoch wrote (seq 0 is never a
	// writer's), and then every other field is 0 too.
	PrevSeq uint64
	// PrevMaxTs is the largest commit ts held by the epoch's segments with
	// seq <= PrevSeq; 0 when they hold nothing. A reader that finds the
	// predecessor missing may accept that only when PrevMaxTs is at or
	// below the checkpoint GC collected up to.
	PrevMaxTs uint64
	// PrevHeaderCRC is the predecessor's header CRC field (its Header.CRC).
	PrevHeaderCRC uint32
	// PrevFooterCRC is the CRC field that ends the predecessor's footer
	// (its Footer.CRC): a footer depends only on the blocks before it, so a
	// writer knows it as soon as the predecessor's last block is written,
	// before the predecessor is sealed.
	PrevFooterCRC uint32
}

// First reports whether l marks the first segment of its epoch.
func (l Link) First() bool { return l.PrevSeq == 0 }

// check reports why l cannot be the link of a segment with sequence number
// seq, or "".
func (l Link) check(seq uint64) string {
	if l.PrevSeq == 0 {
		if l.PrevMaxTs != 0 || l.PrevHeaderCRC != 0 || l.PrevFooterCRC != 0 {
			return fmt.Sprintf("link marks the first segment of the epoch (prev seq 0) but holds prev max ts %d, prev header CRC %#08x, prev footer CRC %#08x",
				l.PrevMaxTs, l.PrevHeaderCRC, l.PrevFooterCRC)
		}
		return ""
	}
	if l.PrevSeq+1 != seq {
		return fmt.Sprintf("link names prev seq %d, but the segment's seq is %d: a predecessor is always seq - 1", l.PrevSeq, seq)
	}
	return ""
}

// The instants time.Time.UnixNano can represent.
var (
	minCreated = time.Unix(0, -1<<63)
	maxCreated = time.Unix(0, 1<<63-1)
)

// validate reports why h cannot be written, or nil. A resumed segment may
// keep an older version it was started with.
func (h *Header) validate(resume bool) error {
	if h.Version != 0 && h.Version != FormatVersion && !(resume && versionSupported(h.Version)) {
		return fmt.Errorf("segment: header: cannot write format version %d (this build writes %d)", h.Version, FormatVersion)
	}
	if err := ValidateID(h.LogID); err != nil {
		return fmt.Errorf("segment: header: log ID: %w", err)
	}
	if err := ValidateID(h.WriterID); err != nil {
		return fmt.Errorf("segment: header: writer ID: %w", err)
	}
	if !h.Compression.valid() {
		return fmt.Errorf("segment: header: unknown compression %d", h.Compression)
	}
	if h.Created.Before(minCreated) || h.Created.After(maxCreated) {
		return fmt.Errorf("segment: header: creation time %v is outside what Unix nanoseconds can hold", h.Created)
	}
	if msg := checkEpochSeq(h.Epoch, h.Seq); msg != "" {
		return fmt.Errorf("segment: header: %s", msg)
	}
	if msg := h.Link.check(h.Seq); msg != "" {
		return fmt.Errorf("segment: header: %s", msg)
	}
	if h.Flags&^knownFlags != 0 || h.Flags != 0 && h.Version != 0 && h.Version < 4 {
		return fmt.Errorf("segment: header: flags %#02x in a version-%d segment", uint8(h.Flags), h.Version)
	}
	return nil
}

// checkEpochSeq reports why epoch and seq cannot be a segment's, or "".
// Epochs count from 1 (a writer state's epoch is at least 1), and seq 0 is
// never used, so that a published seq of 0 names no segment: a header
// holding either 0 was not written by a writer.
func checkEpochSeq(epoch, seq uint64) string {
	switch {
	case epoch == 0:
		return "epoch 0 (epochs count from 1)"
	case seq == 0:
		return "seq 0 (seqs count from 1)"
	}
	return ""
}

// ActiveName is the name of the segment while it is being appended to.
func (h Header) ActiveName() Name {
	return Name{LogID: h.LogID, WriterID: h.WriterID, Epoch: h.Epoch, Seq: h.Seq, Active: true}
}

// SealedName is the name of the segment once sealed holding records in
// [minTs, maxTs].
func (h Header) SealedName(minTs, maxTs uint64) Name {
	return Name{LogID: h.LogID, WriterID: h.WriterID, Epoch: h.Epoch, Seq: h.Seq, MinTs: minTs, MaxTs: maxTs}
}

// Header layout offsets.
const (
	hMagic    = 0
	hVersion  = 8
	hCompress = 10
	hLogLen   = 11
	hWriteLen = 12
	hFlags    = 13 // version 4; reserved zero before
	hReserved = 14 // 2 bytes
	hEpoch    = 16
	hSeq      = 24
	hCreated  = 32
	hLogID    = 40
	hWriterID = hLogID + MaxIDLen
	hPrevSeq  = hWriterID + MaxIDLen // 168
	hPrevMax  = hPrevSeq + 8
	hPrevHCRC = hPrevMax + 8
	hPrevFCRC = hPrevHCRC + 4
	hCRC      = hPrevFCRC + 4 // 192
)

func init() {
	if hCRC+4 != HeaderSize {
		panic("segment: header layout does not add up")
	}
}

// encodeHeader writes h (already validated) into b[:HeaderSize] and sets
// h.CRC to the CRC it wrote.
func encodeHeader(b []byte, h *Header) {
	b = b[:HeaderSize]
	clear(b)
	copy(b[hMagic:], headerMagic[:])
	version := h.Version
	if version == 0 {
		version = FormatVersion
	}
	le.PutUint16(b[hVersion:], version)
	b[hCompress] = byte(h.Compression)
	b[hLogLen] = byte(len(h.LogID))
	b[hWriteLen] = byte(len(h.WriterID))
	b[hFlags] = byte(h.Flags)
	le.PutUint64(b[hEpoch:], h.Epoch)
	le.PutUint64(b[hSeq:], h.Seq)
	le.PutUint64(b[hCreated:], uint64(h.Created.UnixNano()))
	copy(b[hLogID:], h.LogID)
	copy(b[hWriterID:], h.WriterID)
	le.PutUint64(b[hPrevSeq:], h.Link.PrevSeq)
	le.PutUint64(b[hPrevMax:], h.Link.PrevMaxTs)
	le.PutUint32(b[hPrevHCRC:], h.Link.PrevHeaderCRC)
	le.PutUint32(b[hPrevFCRC:], h.Link.PrevFooterCRC)
	h.CRC = crc(b[:hCRC])
	le.PutUint32(b[hCRC:], h.CRC)
}

// DecodeHeader decodes and checks the header in b, which holds at least
// HeaderSize bytes from offset 0 of the segment named object (used in
// errors only). A header that is not whole, not a segment's or fails its CRC
// is a *CorruptionError, as is one whose CRC holds but whose fields break the
// format (an epoch or seq of 0, or a link that does not point at seq - 1);
// a header of a format version this package does not read is a
// *VersionError. It does not tell a torn tail from corruption: that takes
// the rest of the segment (see Scanner).
func DecodeHeader(b []byte, object string) (Header, error) {
	h, version, p := decodeHeader(b)
	if p != nil {
		return Header{}, p.err(object)
	}
	if !versionSupported(version) {
		return Header{}, &VersionError{Object: object, Version: version}
	}
	return h, nil
}

// problem describes what is wrong with a structure read from input. A hard
// problem was found after the structure's CRC held, so the bytes are what a
// writer wrote and cannot be a torn write; a soft one (a failed CRC, a length
// out of range, a short read) may be the torn tail of an unsealed segment.
type problem struct {
	part   string // "header", "block", "progress", "footer", "trailer", "segment"
	off    int64  // offset of the structure in the segment
	detail string
	hard   bool
}

func soft(part string, off int64, format string, args ...any) *problem {
	return &problem{part: part, off: off, detail: fmt.Sprintf(format, args...)}
}

func hard(part string, off int64, format string, args ...any) *problem {
	return &problem{part: part, off: off, detail: fmt.Sprintf(format, args...), hard: true}
}

// decodeHeader parses b[:HeaderSize]. An unknown version with a good magic is
// returned as a version, with a nil problem, so that callers can report it as
// such before anything else: a newer layout need not have a CRC where v1 has.
func decodeHeader(b []byte) (h Header, version uint16, p *problem) {
	if len(b) < HeaderSize {
		return h, 0, soft("header", 0, "%d bytes, need %d", len(b), HeaderSize)
	}
	b = b[:HeaderSize]
	if [8]byte(b[hMagic:hMagic+8]) != headerMagic {
		return h, 0, soft("header", 0, "bad magic %x: not a segment", b[hMagic:hMagic+8])
	}
	version = le.Uint16(b[hVersion:])
	if !versionSupported(version) {
		return h, version, nil
	}
	if got, want := le.Uint32(b[hCRC:]), crc(b[:hCRC]); got != want {
		return h, version, soft("header", 0, "CRC32C mismatch: stored %#08x, computed %#08x", got, want)
	}
	h.Version = version
	h.Compression = Compression(b[hCompress])
	if !h.Compression.valid() {
		return h, version, hard("header", 0, "unknown compression %d", b[hCompress])
	}
	h.Flags = Flags(b[hFlags])
	if version < 4 && h.Flags != 0 || h.Flags&^knownFlags != 0 {
		return h, version, hard("header", 0, "flags byte %#02x: unknown flags, or flags in a version-%d segment", b[hFlags], version)
	}
	if b[hReserved] != 0 || b[hReserved+1] != 0 {
		return h, version, hard("header", 0, "reserved bytes %x are not zero", b[hReserved:hReserved+2])
	}
	var ok bool
	if h.LogID, ok = paddedID(b[hLogID:hLogID+MaxIDLen], int(b[hLogLen])); !ok {
		return h, version, hard("header", 0, "log ID (length %d) is not a valid zero-padded ID", b[hLogLen])
	}
	if h.WriterID, ok = paddedID(b[hWriterID:hWriterID+MaxIDLen], int(b[hWriteLen])); !ok {
		return h, version, hard("header", 0, "writer ID (length %d) is not a valid zero-padded ID", b[hWriteLen])
	}
	h.Epoch = le.Uint64(b[hEpoch:])
	h.Seq = le.Uint64(b[hSeq:])
	h.Created = time.Unix(0, int64(le.Uint64(b[hCreated:]))).UTC()
	if msg := checkEpochSeq(h.Epoch, h.Seq); msg != "" {
		return Header{}, version, hard("header", 0, "%s", msg)
	}
	h.Link = Link{
		PrevSeq:       le.Uint64(b[hPrevSeq:]),
		PrevMaxTs:     le.Uint64(b[hPrevMax:]),
		PrevHeaderCRC: le.Uint32(b[hPrevHCRC:]),
		PrevFooterCRC: le.Uint32(b[hPrevFCRC:]),
	}
	if msg := h.Link.check(h.Seq); msg != "" {
		return Header{}, version, hard("header", 0, "%s", msg)
	}
	h.CRC = le.Uint32(b[hCRC:])
	return h, version, nil
}

// paddedID extracts an ID of length n from a zero-padded field, insisting on
// the padding so that every header has one encoding.
func paddedID(field []byte, n int) (string, bool) {
	if n < 1 || n > len(field) {
		return "", false
	}
	for _, c := range field[n:] {
		if c != 0 {
			return "", false
		}
	}
	id := string(field[:n])
	return id, ValidateID(id) == nil
}

// blockHeader is a decoded block frame header.
type blockHeader struct {
	codec        Compression
	stored       int // bytes of payload after the header
	uncompressed int
	records      int
	ddls         int
	minTs, maxTs uint64
	crc          uint32
}

// Block header layout offsets.
const (
	bType     = 0
	bCodec    = 1
	bReserved = 2 // 2 bytes
	bStored   = 4
	bUncomp   = 8
	bRecords  = 12
	bDDLs     = 16
	bMinTs    = 20
	bMaxTs    = 28
	bCRC      = 36
)

// parseBlockHeader checks everything about a block header that can be checked
// before its CRC, so that no length read from input is trusted unbounded. All
// its problems are soft: the CRC has not been checked yet. The reserved bytes
// are checked after the CRC (blockDecoder.decode), where non-zero ones are
// corruption rather than a torn tail.
func parseBlockHeader(b []byte, off int64) (bh blockHeader, p *problem) {
	if len(b) < BlockHeaderSize {
		return bh, soft("block", off, "header is %d bytes, need %d", len(b), BlockHeaderSize)
	}
	if b[bType] != frameBlock {
		return bh, soft("block", off, "frame type %d is not a block", b[bType])
	}
	bh.codec = Compression(b[bCodec])
	if !bh.codec.valid() {
		return bh, soft("block", off, "unknown block codec %d", b[bCodec])
	}
	stored, uncomp := le.Uint32(b[bStored:]), le.Uint32(b[bUncomp:])
	records, ddls := le.Uint32(b[bRecords:]), le.Uint32(b[bDDLs:])
	bh.minTs, bh.maxTs = le.Uint64(b[bMinTs:]), le.Uint64(b[bMaxTs:])
	bh.crc = le.Uint32(b[bCRC:])
	switch {
	case uncomp > MaxBlockSize:
		return bh, soft("block", off, "uncompressed length %d exceeds the limit %d", uncomp, MaxBlockSize)
	case records == 0:
		return bh, soft("block", off, "record count is 0")
	case uint64(records)*minRecordSize > uint64(uncomp):
		return bh, soft("block", off, "%d records cannot fit %d uncompressed bytes", records, uncomp)
	case ddls > records:
		return bh, soft("block", off, "DDL count %d exceeds record count %d", ddls, records)
	case bh.minTs > bh.maxTs:
		return bh, soft("block", off, "min commit ts %d exceeds max commit ts %d", bh.minTs, bh.maxTs)
	case bh.codec == CompressionNone && stored != uncomp:
		return bh, soft("block", off, "raw block stores %d bytes but says %d uncompressed", stored, uncomp)
	case bh.codec == CompressionLZ4 && (stored == 0 || stored >= uncomp):
		// A writer keeps lz4 output only when it is smaller.
		return bh, soft("block", off, "lz4 block stores %d bytes for %d uncompressed", stored, uncomp)
	}
	bh.stored, bh.uncompressed = int(stored), int(uncomp)
	bh.records, bh.ddls = int(records), int(ddls)
	return bh, nil
}

// blockCRC is the CRC of a block frame: its header up to the CRC field, then
// the stored payload.
func blockCRC(hdr, payload []byte) uint32 {
	return crc32.Update(crc(hdr[:bCRC]), castagnoli, payload)
}

func encodeBlockHeader(b []byte, bh *blockHeader, payload []byte) {
	b = b[:BlockHeaderSize]
	b[bType] = frameBlock
	b[bCodec] = byte(bh.codec)
	b[bReserved], b[bReserved+1] = 0, 0
	le.PutUint32(b[bStored:], uint32(bh.stored))
	le.PutUint32(b[bUncomp:], uint32(bh.uncompressed))
	le.PutUint32(b[bRecords:], uint32(bh.records))
	le.PutUint32(b[bDDLs:], uint32(bh.ddls))
	le.PutUint64(b[bMinTs:], bh.minTs)
	le.PutUint64(b[bMaxTs:], bh.maxTs)
	le.PutUint32(b[bCRC:], blockCRC(b, payload))
}

// BlockInfo describes one block: its footer index entry.
type BlockInfo struct {
	Offset       int64  // offset of the block frame in the segment
	Length       int    // frame length: BlockHeaderSize plus the stored payload
	Uncompressed int    // uncompressed length of the records
	Records      int    // number of records
	DDLs         int    // how many of them are DDLs
	MinTs        uint64 // commit ts of the first record
	MaxTs        uint64 // commit ts of the last record
}

// End is the offset just past the block.
func (b BlockInfo) End() int64 { return b.Offset + int64(b.Length) }

func (bh *blockHeader) info(off int64) BlockInfo {
	return BlockInfo{
		Offset: off, Length: BlockHeaderSize + bh.stored, Uncompressed: bh.uncompressed,
		Records: bh.records, DDLs: bh.ddls, MinTs: bh.minTs, MaxTs: bh.maxTs,
	}
}

// Footer is what a sealed segment's footer holds: the block index and the
// segment's totals.
type Footer struct {
	Blocks       []BlockInfo
	Records      uint64 // all records
	Rows         uint64 // records of KindRow
	DDLs         uint64 // records of KindDDL
	MinTs        uint64 // commit ts of the first record; 0 in an empty segment
	MaxTs        uint64 // commit ts of the last record; 0 in an empty segment
	Uncompressed uint64 // sum of the blocks' uncompressed lengths
	// CRC is the CRC field that ends the footer, which the successor's
	// Link.PrevFooterCRC repeats. Readers fill it in, and so does
	// Writer.Seal. It is a function of Blocks alone (FooterCRC).
	CRC uint32
}

// FooterCRC returns the CRC field of the footer that indexes blocks: what
// Footer.CRC of a segment sealed with exactly those blocks will be. A writer
// computes it for its successor's link when it stops appending to a segment,
// whether the segment is sealed then or later (by the writer, or by the
// recovery of a crashed one: the same blocks make the same footer).
func FooterCRC(blocks []BlockInfo) uint32 {
	f := footerFor(blocks)
	b := appendFooter(nil, &f)
	return le.Uint32(b[len(b)-footerCRCSize:])
}

// Footer layout offsets.
const (
	fType     = 0
	fReserved = 1 // 3 bytes
	fBlocks   = 4
	fRecords  = 8
	fRows     = 16
	fDDLs     = 24
	fMinTs    = 32
	fMaxTs    = 40
	fUncomp   = 48
)

// footerFor computes the totals of blocks.
func footerFor(blocks []BlockInfo) Footer {
	f := Footer{Blocks: blocks}
	for _, b := range blocks {
		f.Records += uint64(b.Records)
		f.DDLs += uint64(b.DDLs)
		f.Uncompressed += uint64(b.Uncompressed)
	}
	f.Rows = f.Records - f.DDLs
	if len(blocks) > 0 {
		f.MinTs, f.MaxTs = blocks[0].MinTs, blocks[len(blocks)-1].MaxTs
	}
	return f
}

func footerSize(nblocks int) int { return minFooterSize + nblocks*IndexEntrySize }

// appendFooter appends the footer for f and sets f.CRC to its CRC field.
func appendFooter(dst []byte, f *Footer) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, footerSize(len(f.Blocks)))...)
	b := dst[start:]
	b[fType] = frameFooter
	le.PutUint32(b[fBlocks:], uint32(len(f.Blocks)))
	le.PutUint64(b[fRecords:], f.Records)
	le.PutUint64(b[fRows:], f.Rows)
	le.PutUint64(b[fDDLs:], f.DDLs)
	le.PutUint64(b[fMinTs:], f.MinTs)
	le.PutUint64(b[fMaxTs:], f.MaxTs)
	le.PutUint64(b[fUncomp:], f.Uncompressed)
	e := b[FooterFixedSize:]
	for _, bi := range f.Blocks {
		le.PutUint64(e[0:], uint64(bi.Offset))
		le.PutUint32(e[8:], uint32(bi.Length))
		le.PutUint32(e[12:], uint32(bi.Uncompressed))
		le.PutUint32(e[16:], uint32(bi.Records))
		le.PutUint32(e[20:], uint32(bi.DDLs))
		le.PutUint64(e[24:], bi.MinTs)
		le.PutUint64(e[32:], bi.MaxTs)
		e = e[IndexEntrySize:]
	}
	n := len(b) - footerCRCSize
	f.CRC = crc(b[:n])
	le.PutUint32(b[n:], f.CRC)
	return dst
}

// footerBlockCount reads the block count from a footer's fixed part after the
// checks that precede it, so a reader knows how many bytes the footer spans.
func footerBlockCount(b []byte, off int64) (int, *problem) {
	if len(b) < FooterFixedSize {
		return 0, soft("footer", off, "%d bytes, need at least %d", len(b), minFooterSize)
	}
	if b[fType] != frameFooter {
		return 0, soft("footer", off, "frame type %d is not a footer", b[fType])
	}
	// The count is not checked against anything here: callers know how
	// many blocks can precede off and bound it before they read.
	return int(le.Uint32(b[fBlocks:])), nil
}

// decodeFooter parses and checks a whole footer found at off in a segment of
// the given format version: its CRC, then that its index describes blocks in
// commit-ts order between the end of the header and off (contiguous in
// version 2; in version 3 the gaps hold progress frames, which the index does
// not describe), and that its totals agree with the index.
func decodeFooter(b []byte, off int64, version uint16) (Footer, *problem) {
	var f Footer
	n, p := footerBlockCount(b, off)
	if p != nil {
		return f, p
	}
	if len(b) != footerSize(n) {
		return f, soft("footer", off, "%d bytes, but %d blocks need %d", len(b), n, footerSize(n))
	}
	end := len(b) - footerCRCSize
	if got, want := le.Uint32(b[end:]), crc(b[:end]); got != want {
		return f, soft("footer", off, "CRC32C mismatch: stored %#08x, computed %#08x", got, want)
	}
	if b[fReserved] != 0 || b[fReserved+1] != 0 || b[fReserved+2] != 0 {
		return f, hard("footer", off, "reserved bytes %x are not zero", b[fReserved:fReserved+3])
	}
	f.Blocks = make([]BlockInfo, n)
	e := b[FooterFixedSize:]
	for i := range f.Blocks {
		f.Blocks[i] = BlockInfo{
			Offset:       int64(le.Uint64(e[0:])),
			Length:       int(le.Uint32(e[8:])),
			Uncompressed: int(le.Uint32(e[12:])),
			Records:      int(le.Uint32(e[16:])),
			DDLs:         int(le.Uint32(e[20:])),
			MinTs:        le.Uint64(e[24:]),
			MaxTs:        le.Uint64(e[32:]),
		}
		e = e[IndexEntrySize:]
	}
	gaps := version >= 3
	if blocksEnd, msg := checkIndex(f.Blocks, gaps, off); msg != "" {
		return f, hard("footer", off, "index: %s", msg)
	} else if !gaps && blocksEnd != off {
		return f, hard("footer", off, "index ends at offset %d, not at the footer", blocksEnd)
	}
	want := footerFor(f.Blocks)
	got := Footer{
		Blocks:       f.Blocks,
		Records:      le.Uint64(b[fRecords:]),
		Rows:         le.Uint64(b[fRows:]),
		DDLs:         le.Uint64(b[fDDLs:]),
		MinTs:        le.Uint64(b[fMinTs:]),
		MaxTs:        le.Uint64(b[fMaxTs:]),
		Uncompressed: le.Uint64(b[fUncomp:]),
		CRC:          le.Uint32(b[end:]),
	}
	if got.Records != want.Records || got.Rows != want.Rows || got.DDLs != want.DDLs ||
		got.MinTs != want.MinTs || got.MaxTs != want.MaxTs || got.Uncompressed != want.Uncompressed {
		return f, hard("footer", off, "totals (records %d, rows %d, DDLs %d, ts [%d, %d], %d bytes) disagree with the index (records %d, rows %d, DDLs %d, ts [%d, %d], %d bytes)",
			got.Records, got.Rows, got.DDLs, got.MinTs, got.MaxTs, got.Uncompressed,
			want.Records, want.Rows, want.DDLs, want.MinTs, want.MaxTs, want.Uncompressed)
	}
	return got, nil
}

// checkIndex checks that blocks could have been written by a Writer: each one
// plausible, the first right after the header, each next one right after the
// previous (or, when gaps are allowed, at or after it: progress frames fill
// the gaps), the last ending at or before limit, commit ts never going down.
// It returns where the last block ends, or a description of the first
// violation.
func checkIndex(blocks []BlockInfo, gaps bool, limit int64) (end int64, msg string) {
	end = HeaderSize
	var prevMax uint64
	for i, b := range blocks {
		stored := b.Length - BlockHeaderSize
		switch {
		case !gaps && b.Offset != end:
			return 0, fmt.Sprintf("block %d is at offset %d, expected %d", i, b.Offset, end)
		case gaps && b.Offset < end:
			return 0, fmt.Sprintf("block %d is at offset %d, before %d where the previous frame ends", i, b.Offset, end)
		case b.Length < 0 || b.Offset > limit-int64(b.Length):
			return 0, fmt.Sprintf("block %d at offset %d with frame length %d ends past %d", i, b.Offset, b.Length, limit)
		case b.Uncompressed < 0 || b.Uncompressed > MaxBlockSize:
			return 0, fmt.Sprintf("block %d at offset %d: uncompressed length %d exceeds the limit %d", i, b.Offset, b.Uncompressed, MaxBlockSize)
		case stored < 1 || stored > b.Uncompressed:
			return 0, fmt.Sprintf("block %d at offset %d: frame length %d does not fit %d uncompressed bytes", i, b.Offset, b.Length, b.Uncompressed)
		case b.Records < 1 || b.Records*minRecordSize > b.Uncompressed:
			return 0, fmt.Sprintf("block %d at offset %d: %d records cannot fit %d bytes", i, b.Offset, b.Records, b.Uncompressed)
		case b.DDLs < 0 || b.DDLs > b.Records:
			return 0, fmt.Sprintf("block %d at offset %d: DDL count %d, record count %d", i, b.Offset, b.DDLs, b.Records)
		case b.MinTs > b.MaxTs:
			return 0, fmt.Sprintf("block %d at offset %d: min commit ts %d exceeds max %d", i, b.Offset, b.MinTs, b.MaxTs)
		case i > 0 && b.MinTs < prevMax:
			return 0, fmt.Sprintf("block %d at offset %d: min commit ts %d is below the previous block's max %d", i, b.Offset, b.MinTs, prevMax)
		}
		prevMax = b.MaxTs
		end = b.End()
	}
	return end, ""
}

// Trailer layout offsets.
const (
	tFooterOff = 0
	tFooterLen = 8
	tVersion   = 12
	tReserved  = 14 // 2 bytes
	tCRC       = 16
	tMagic     = 20
)

func encodeTrailer(b []byte, footerOff int64, footerLen int, version uint16) {
	b = b[:TrailerSize]
	clear(b)
	le.PutUint64(b[tFooterOff:], uint64(footerOff))
	le.PutUint32(b[tFooterLen:], uint32(footerLen))
	le.PutUint16(b[tVersion:], version)
	le.PutUint32(b[tCRC:], crc(b[:tCRC]))
	copy(b[tMagic:], trailerMagic[:])
}

// decodeTrailer parses a trailer found at off. As with the header, an unknown
// version behind a good magic is returned without a problem.
func decodeTrailer(b []byte, off int64) (footerOff int64, footerLen int, version uint16, p *problem) {
	if len(b) < TrailerSize {
		return 0, 0, 0, soft("trailer", off, "%d bytes, need %d", len(b), TrailerSize)
	}
	b = b[:TrailerSize]
	if [8]byte(b[tMagic:tMagic+8]) != trailerMagic {
		return 0, 0, 0, soft("trailer", off, "bad magic %x: the segment is not sealed, or is truncated", b[tMagic:tMagic+8])
	}
	version = le.Uint16(b[tVersion:])
	if !versionSupported(version) {
		return 0, 0, version, nil
	}
	if got, want := le.Uint32(b[tCRC:]), crc(b[:tCRC]); got != want {
		return 0, 0, version, soft("trailer", off, "CRC32C mismatch: stored %#08x, computed %#08x", got, want)
	}
	if b[tReserved] != 0 || b[tReserved+1] != 0 {
		return 0, 0, version, hard("trailer", off, "reserved bytes %x are not zero", b[tReserved:tReserved+2])
	}
	return int64(le.Uint64(b[tFooterOff:])), int(le.Uint32(b[tFooterLen:])), version, nil
}
