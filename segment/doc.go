// Package segment is the redo log's segment format: how a writer's records lie
// in one immutable object, or in one local file appended to until it is
// sealed. This comment is the specification; docs/FORMAT.md says the same for
// readers outside Go, and testdata/ holds golden segments with dumps of what
// their bytes mean.
//
// A record is (commit ts, kind, payload): a row change or a DDL, its payload
// encoded by the codec package. The segment layer never looks inside a
// payload, so it imports no codec; the writer and reader layers encode and
// decode events on either side of it, and must check that a record's kind
// and commit ts are its event's. The golden segments' payloads are real
// events (the golden test encodes them with codec).
//
// # Layout
//
// A segment is a header, blocks and progress frames, and, once sealed, a
// footer and a trailer:
//
//	+--------+----------+---------+---------+-----+-------------+--------+---------+
//	| header | progress | block 0 | block 1 | ... | block n - 1 | footer | trailer |
//	+--------+----------+---------+---------+-----+-------------+--------+---------+
//	0        196                                                 F        T    T + 28
//
// Frames follow one another without gaps or padding: blocks and progress
// frames in any order (a progress frame may follow the header, a block or
// another progress frame), then the footer. An unsealed segment stops after
// any whole frame (or after the header). All
// integers are little-endian and unsigned unless noted. Every byte of a sealed
// segment is covered by a CRC-32C (Castagnoli polynomial, as hash/crc32 with
// crc32.Castagnoli computes it, no masking; CRC-32C("123456789") is
// 0xe3069283) or is a magic number that is compared, so any single damaged
// byte is detected by a front-to-back read (a Reader skips progress frames).
//
// # Header, 196 bytes at offset 0
//
//	offset size  field
//	     0    8  magic: 0x89 'R' 'D' 'K' 'S' 'E' 'G' '\n'
//	     8    2  format version: 4 (readers also read 2 and 3)
//	    10    1  compression policy: 0 none, 1 lz4
//	    11    1  log ID length, 1..64
//	    12    1  writer ID length, 1..64
//	    13    1  flags (version 4; zero before): bit 0 staged, bit 1 catch-up
//	             (see [Flags]); other bits zero
//	    14    2  reserved, zero
//	    16    8  writer epoch, >= 1
//	    24    8  segment sequence number, >= 1
//	    32    8  creation time: Unix nanoseconds, two's complement int64
//	    40   64  log ID, then zero bytes to fill the field
//	   104   64  writer ID, then zero bytes to fill the field
//	   168    8  prev seq: the predecessor's seq in the epoch's chain; 0: first of the epoch
//	   176    8  prev chain max ts: largest commit ts in the epoch's segments with seq <= prev seq
//	   184    4  prev header CRC: the predecessor's header CRC field
//	   188    4  prev footer CRC: the CRC field ending the predecessor's footer
//	   192    4  CRC-32C of bytes [0, 192): the header CRC, the segment's digest
//
// The magic's high first byte and trailing newline catch 7-bit and
// line-ending mangling at the first check. Readers check the magic, then the
// version, then the CRC, so a newer version is reported as such rather than as
// a CRC failure of a layout this reader does not know; then the fields. The
// link ([Link]) is 0 in all four fields (the first segment of its epoch) or
// names seq - 1; anything else is corruption, as is an epoch or seq of 0
// (epochs and seqs count from 1: no writer writes either).
//
// # The chain
//
// Within one writer epoch, seqs are consecutive and every segment links its
// predecessor: the first segment the epoch writes has prev seq 0 (its seq is
// one above the highest any earlier epoch left; seq 0 is never a writer's),
// every next one prev seq = seq - 1, the predecessor's header CRC
// ([Header].CRC), its footer CRC ([Footer].CRC) and the chain max ts through
// it (the max of the predecessor's own prev chain max ts and its records'
// max, which differ when a catch-up segment holds lower ts than the one
// before it). A footer depends only on the blocks ([FooterCRC]), so a writer
// links a predecessor as soon as its last block is written
// ([Writer.FooterCRC]), and whoever seals it later (the writer, or the
// recovery of a crashed one) writes that same footer. A reader holding the
// published end of a chain (the writer state's seq and digest) proves from
// the links that no segment below it is missing, unlisted or replaced, and,
// from the prev chain max ts, that one GC collected held nothing above the
// checkpoint.
//
// # Block: a 40-byte header and S stored bytes
//
//	offset size  field
//	     0    1  frame type: 1 (block)
//	     1    1  codec of this block: 0 raw, 1 lz4
//	     2    2  reserved, zero
//	     4    4  S: stored length
//	     8    4  U: uncompressed length, at most 64 MiB (MaxBlockSize)
//	    12    4  record count, at least 1
//	    16    4  DDL record count
//	    20    8  min commit ts: the first record's
//	    28    8  max commit ts: the last record's
//	    36    4  CRC-32C of header bytes [0, 36) followed by the S stored bytes
//	    40    S  the records: raw (S = U) or one lz4 block (0 < S < U)
//
// lz4 is the LZ4 block format (no frame, no dictionary; decompress with the
// known U). A writer whose policy is lz4 stores a block raw when lz4 would
// not make it smaller, so a reader must look at each block's codec, never at
// the header's policy alone. Under policy none every block is raw: an lz4
// block there is corruption.
//
// The U bytes are the block's records, back to back:
//
//	uvarint   commit ts minus the previous record's (0 for the block's first)
//	byte      kind: 1 row, 2 DDL
//	uvarint   payload length P
//	P bytes   payload
//
// (uvarint as encoding/binary: 7 bits a byte, least significant group first,
// high bit set on all but the last.) A block is valid when its CRC holds, it
// decompresses to exactly U bytes, exactly the header's record count of
// records fill them, commit ts runs from the min to the max never going down,
// every kind is known, and the DDL count matches. Commit ts never goes down
// across blocks either: a block's min is at least the previous block's max
// (records of one ts may span blocks). A record is never split across blocks.
//
// # Progress frame: 32 + 16 × N + 4 bytes (format version 4)
//
// A writer's flush progress, made durable by the same sync or upload as the
// blocks before it ([Writer.AppendProgressCommitted], [AppendProgressFrame]):
//
//	offset size  field
//	     0    1  frame type: 3 (progress)
//	     1    3  reserved, zero
//	     4    4  N: span count, at most MaxProgressSpans (1 << 20)
//	     8    8  flushed ts
//	    16    8  chain max ts through this frame
//	    24    8  committed ts, at least the flushed ts (version 4)
//	    32 16×N  spans: N × (span uint64, ts uint64), strictly increasing by span
//	32+16N    4  CRC-32C of bytes [0, 32 + 16N)
//
// A version-3 segment's frames have no committed ts (spans at 24, CRC at
// 24 + 16N); reading one gives a committed ts of max(chain max ts, flushed
// ts). The committed ts is the writer epoch's: an event of the epoch is part
// of the log only when a durable frame's committed ts covers it, and blocks
// may hold events staged above it (see [Progress.CommittedTs] and
// docs/FORMAT.md, "The commit rule").
//
// The chain max ts through the frame is the max of the header link's prev
// chain max ts and the max commit ts of every block before the frame in the
// segment. A version-3 progress frame with no spans, 28 bytes, is the
// smallest frame of any version.
// A progress frame is valid when its type and N are in range, its CRC holds,
// its reserved bytes are zero, its spans are strictly increasing, its
// committed ts is at least its flushed ts and its
// chain max ts is what the header and the blocks before it give. Version-2
// segments have none: a progress frame in one is corruption.
//
// # Footer: 56 + 40 × n + 4 bytes at offset F, written when sealing
//
//	offset size  field
//	     0    1  frame type: 2 (footer)
//	     1    3  reserved, zero
//	     4    4  n: block count
//	     8    8  records
//	    16    8  row records
//	    24    8  DDL records
//	    32    8  min commit ts of the segment (0 when it has no records)
//	    40    8  max commit ts of the segment (0 when it has no records)
//	    48    8  sum of the blocks' uncompressed lengths
//	    56 40×n  index: one entry a block, in order
//	56+40n    4  CRC-32C of footer bytes [0, 56 + 40n)
//
// An index entry:
//
//	offset size  field
//	     0    8  offset of the block in the segment
//	     8    4  frame length: 40 + S
//	    12    4  U
//	    16    4  record count
//	    20    4  DDL count
//	    24    8  min commit ts
//	    32    8  max commit ts
//
// The footer's CRC field is what a successor links as prev footer CRC. The
// footer indexes blocks only, never progress frames, and is a function of the
// index alone ([FooterCRC]).
//
// The index must describe the blocks exactly: the first at offset 196 or
// later, each next one at or after where the previous ends, the last ending at
// or before F, with the same fields as the block headers; the totals must be
// the sums. The bytes between the header and the first block, between blocks,
// and between the last block and F are exactly whole, valid progress frames
// (in a version-2 segment there are none: the blocks are contiguous from 196
// to F). The first byte of every frame after the header says whether a
// block, a progress frame or the footer follows, so a reader going front to
// back knows where the frames end.
//
// # Trailer: 28 bytes at offset T = F + footer length, ending the segment
//
//	offset size  field
//	     0    8  F: footer offset
//	     8    4  footer length
//	    12    2  format version: the header's
//	    14    2  reserved, zero
//	    16    4  CRC-32C of trailer bytes [0, 16)
//	    20    8  magic: 0x89 'R' 'D' 'K' 'E' 'N' 'D' '\n'
//
// F + footer length + 28 equals the segment's size, so a reader of a sealed
// object needs its size, one ranged read of its end for the trailer and
// (usually) the footer, and one of its start for the header. Nothing follows
// the trailer.
//
// # Reading a sealed segment ([Reader])
//
// Read the trailer from the end; check its magic, version, CRC and that the
// footer it points at ends where the trailer starts. Read and check the footer
// (its index as far as the index alone allows: entries in order, each at or
// after the end of the one before, all within [196, F]), then the header,
// whose version must be the trailer's. Then read blocks through the index,
// skipping the gaps between them unread: SeekTs(ts) finds the first block
// whose max commit ts is above ts by binary search. Every block is checked
// against its CRC and against its index entry. In a sealed segment any
// failure is a [*CorruptionError], wherever it is. A Reader does not read
// progress frames, so damage inside one is found only by a [Scanner].
//
// # Reading front to back, and recovering an unsealed segment ([Scanner])
//
// Read the header, then frames: a block (type 1), a progress frame (type 3;
// its chain max ts checked against the header and the blocks read), or the
// footer (type 2; its index must equal the blocks read, at their offsets, so
// its gaps are the progress frames read) followed by the trailer, whose
// version must be the header's, and the end of the stream. The stream may
// also end cleanly right after a header or any whole frame: an unsealed
// segment. [Scanner.Progress] and [Recovery].Progress report the progress
// frames; Next and NextBlock pass over them.
//
// A frame is damaged when the stream ends inside it, when a header field is
// out of range (checked before any length is trusted: S and U within the
// limits above, a record count that fits U, a progress frame's N at most
// MaxProgressSpans, a footer block count equal to the number of blocks read),
// or when its CRC fails. A writer appends whole frames and syncs at frame
// boundaries, so after a crash only the frames written since the last sync
// can be damaged, and nothing valid can follow them. The rule is therefore:
// damage at offset O is a torn tail if no valid frame (a block, progress
// frame or footer whose CRC holds, or a trailer whose magic and CRC hold)
// starts anywhere in the bytes after O; the valid segment is then bytes
// [0, O), and the writer truncates there before it resumes. Damage followed by
// a valid frame is corruption. A whole footer followed by a damaged trailer
// counts as a torn seal: the segment is unsealed, torn at the footer. Damage
// in the header is a torn tail at offset 0 on the same rule. A structure
// whose CRC holds but whose contents break a rule above was written that way:
// always corruption. Only what bounds the bytes read is checked before a
// frame's CRC; everything else after it, so non-zero reserved bytes, a bad
// link, bad records, unordered spans or a wrong chain max ts in a progress
// frame, or a bad index under a good CRC are corruption, never a torn tail. A
// [*CorruptionError]'s Part names the structure ("header", "block",
// "progress", "footer", "trailer" or "segment"), its Offset is where the
// structure starts (0, a block's or progress frame's offset, the footer's or
// the trailer's), and its Detail
// names the count that failed: a block's record count or DDL count, the
// footer's block count or totals. A segment known to be sealed (every object in an object
// store) is read with [ScannerOptions].RequireSealed, which turns a torn tail
// or a missing footer into corruption.
//
// # Names
//
// Sealed segments are named
//
//	<log ID>/seg/<writer ID>/<epoch>-<seq>-<min ts>-<max ts>.seg
//
// and an active local segment, still appended to,
//
//	<log ID>/seg/<writer ID>/<epoch>-<seq>.active
//
// with every number 20 decimal digits, zero-padded, and IDs of 1 to 64
// characters from [A-Za-z0-9._-], not "." or "..". See [Name]. A key is a
// segment only when it parses whole ([ParseName]): ".seg" is part of the
// sealed-name grammar, not an extension that makes any key a segment. An
// empty sealed segment is named with min and max ts 0. A name must match its
// segment ([Name.Check]): log, writer, epoch and seq the header's, a sealed
// name's ts range the footer's.
//
// # Versions
//
// The version in the header and trailer (they must be equal) is the version
// of everything in this comment: 4, which added the committed ts to the
// progress frame and the header's flags byte (a version-3 reader would take
// staged events for committed). Version 3, which added the progress frame
// and the gaps it leaves in the footer index, and version 2, which added the
// chain link, are still read (MinReadVersion): a version-2 segment is one
// without progress frames, with a gapless index. Writers write version 4;
// [ResumeWriter] finishes an active version-2 or 3 segment in its version. Version 1 was never
// released and is not read: it is rejected like any version this package does
// not implement, with a [*VersionError] naming it. Reserved bytes are zero, and a reader
// rejects any that are not, so they cannot carry meaning silently: any change
// an older reader would misread (a field, a codec, a record kind, a layout)
// takes a new version. The payload's own encoding is versioned by the codec
// package.
//
// # Go API
//
// [Writer] appends records to an io.Writer: the same code writes an
// appendable file (FlushBlock, then fsync, at each flush) and an in-memory
// object (Seal, then upload). [Writer.AppendProgress] writes a progress
// frame after the blocks so far (before the sync or the upload that makes
// them durable); [AppendProgressFrame] and [DecodeProgressFrame] encode and
// decode one without a Writer. [ResumeWriter] continues an unsealed segment
// after [Recover] has found its valid prefix, its blocks and its progress
// frames. A writer that compresses on
// several goroutines builds blocks with [BlockBuilder], encodes them with one
// [FrameEncoder] per goroutine and appends them in order with
// [Writer.AppendFrame]: the bytes are those Append would write. [Reader]
// reads sealed segments through an io.ReaderAt; [Scanner] reads any segment
// from an io.Reader. Records are handed out without copying: a [Record]'s
// payload is valid until the next call. After their buffers have grown,
// neither writing nor reading allocates per record; they grow with headroom,
// so that blocks of slightly different sizes do not regrow them, and
// [Reader.Reset] keeps them for the next segment.
package segment
