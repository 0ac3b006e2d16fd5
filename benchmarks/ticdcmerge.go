package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pierrec/lz4/v4"

	"github.com/redokit/redokit/benchmarks/internal/msgpbench"
	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/reader"
)

// The sort-then-merge baseline on TiCDC-format files: the same model of
// TiCDC's `redo apply` reader as sortmerge.go (pkg/redo/reader/file.go in
// ticdc, cdc/redo/reader/file.go in tiflow: sortAndWriteFile, then a heap
// merge of the sorted files), but over the files TiCDC's writer would have made of the
// same events, decoded with msgp into TiCDC's RedoLog shape, as TiCDC
// does, instead of redokit's segments and codec. Before the clock starts,
// convertToTicdc reads the log with redokit's reader and writes its events
// through the model of TiCDC's file writer with lz4 (ticdcPeer, the
// ticdc-lz4 peer of peers.go): one directory per writer of the log, files
// rotated at 64 MiB of frames, one lz4 frame each. The timed read,
// ticdcSortMergeRead:
//
//  1. list the files, keeping those whose name's commit ts is above the
//     start of the range (TiCDC's shouldOpen; a .tmp file always);
//  2. 16 workers each read a whole file, inflate it when it starts with
//     lz4's magic number, decode every record with msgp into a RedoLog of
//     its own, held in memory, sort them by (commit ts, start ts, delete <
//     update < insert), drop those outside (start, end] and write the rest
//     to a local sorted file (.sort) in TiCDC's framing, msgp records (as
//     TiCDC's sortAndWriteFile does through its file writer);
//  3. a k-way heap merge of the sorted files, each read through a 4 KiB
//     bufio.Reader, frame by frame, each record msgp-decoded.
//
// Where it departs from TiCDC it is still in TiCDC's favour: pdqsort
// instead of container/heap, no fsync of the sorted files, the records of
// an inflated file sliced from it instead of copied out one by one, one
// reused RedoLog per sorted file in the merge instead of a new one per
// record, no conversion of the decoded RedoLog into TiCDC's row events
// (its UnmarshalRedoLog does that), and the merged events consumed in the
// merging goroutine instead of through a channel.

// ticdcRedoDDL is RedoLog.Type of a DDL (1 is a row).
const ticdcRedoDDL = 2

// ticdcFiles is what convertToTicdc wrote.
type ticdcFiles struct {
	files     int
	rows      int64
	msgpBytes int64 // the records (prefix and msgpack), uncompressed
	stored    int64 // the files on disk (lz4)
}

// convertToTicdc writes the events of logID with commit ts in (0, maxTs],
// read with redokit's reader, into TiCDC-format files under dir: each
// writer of the log (the segment an event came from names it) through its
// own model of TiCDC's file writer with lz4 (openTicdcPeer, as the
// ticdc-lz4 peer cells run it), in dir/<writer ID>/, so that each file
// holds one writer's events in commit-ts order, as TiCDC's do. Row events
// only: TiCDC keeps DDLs in files of their own, which this model does not
// write (the read cells' logs have none), and a DDL is an error.
func convertToTicdc(ctx context.Context, b *blob.Bucket, logID string, maxTs uint64, dir string) (ticdcFiles, error) {
	var out ticdcFiles
	r, err := reader.Open(ctx, b, &reader.Options{LogID: logID, StartTs: 0, EndTs: maxTs})
	if err != nil {
		return out, err
	}
	defer r.Close()
	peers := map[string]*ticdcPeer{}
	var txn peerTxn
	err = func() error {
		for {
			evs, err := r.NextBatch(ctx, 1024)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			// Each run of one writer's events goes to that writer's files
			// (appended before the next batch: the events are the reader's).
			for i := 0; i < len(evs); {
				w := evs[i].Source.Name.WriterID
				txn.rls = txn.rls[:0]
				j := i
				for ; j < len(evs) && evs[j].Source.Name.WriterID == w; j++ {
					if evs[j].IsDDL() {
						return fmt.Errorf("%s: a DDL at commit ts %d: the TiCDC-format model converts row events only", evs[j].Source.Key, evs[j].CommitTs())
					}
					txn.rls = append(txn.rls, msgpbench.FromEvent(&evs[j].Event))
				}
				p := peers[w]
				if p == nil {
					d := filepath.Join(dir, w)
					if err := os.MkdirAll(d, 0o755); err != nil {
						return err
					}
					lp, err := openTicdcPeer(d, true)
					if err != nil {
						return err
					}
					p = lp.(*ticdcPeer)
					peers[w] = p
				}
				if err := p.append(ctx, &txn); err != nil {
					return err
				}
				out.rows += int64(j - i)
				i = j
			}
		}
	}()
	for _, p := range peers {
		err = errors.Join(err, p.close(ctx))
		out.files += p.files
		out.msgpBytes += p.n
	}
	out.stored = dirSize(dir)
	return out, err
}

// ticdcSortMergeRead reads the events with commit ts in (start, end] of
// the TiCDC-format files under dir the way TiCDC's redo apply does (see
// above), writing its sorted files under tmpDir, and folds every event it
// yields, in order, into the digest.
func ticdcSortMergeRead(dir string, start, end uint64, tmpDir string) (*eventDigest, sortMergeStats, error) {
	return sortThenMerge(tmpDir,
		func() ([]string, error) { return ticdcObjects(dir, start) },
		func(src, file string) (int64, error) { return sortTicdcFile(src, start, end, file) },
		func(files []string) (*eventDigest, error) { return mergeTicdcSorted(files, start, end) })
}

// ticdcObjects lists the TiCDC-format files under dir whose name's commit
// ts ({capture}_{changefeed}_row_{commit ts}_{n}.log, the file's max) is
// above start; .tmp files are always kept (TiCDC's shouldOpen).
func ticdcObjects(dir string, start uint64) ([]string, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		name := d.Name()
		if strings.HasSuffix(name, ".log.tmp") {
			paths = append(paths, path)
			return nil
		}
		f := strings.Split(strings.TrimSuffix(name, ".log"), "_")
		if !strings.HasSuffix(name, ".log") || len(f) < 3 {
			return fmt.Errorf("%s: not a TiCDC redo file name", path)
		}
		ts, err := strconv.ParseUint(f[len(f)-2], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: no commit ts in the name: %w", path, err)
		}
		if ts > start {
			paths = append(paths, path)
		}
		return nil
	})
	return paths, err
}

// lz4Magic starts an lz4 frame (TiCDC's isLZ4Compressed looks for it).
var lz4Magic = []byte{0x04, 0x22, 0x4d, 0x18}

// sortTicdcFile is one worker's job: read the whole file, inflate it,
// decode every record into a RedoLog of its own, sort them, and write
// those in (start, end] to path in TiCDC's framing. It returns the bytes
// written.
func sortTicdcFile(src string, start, end uint64, path string) (int64, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return 0, err
	}
	if bytes.HasPrefix(data, lz4Magic) {
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(lz4.NewReader(bytes.NewReader(data))); err != nil {
			return 0, fmt.Errorf("%s: %w", src, err)
		}
		data = buf.Bytes()
	}
	// Every record is held, decoded, until the file is sorted and
	// written: this is where TiCDC's reader spends its memory.
	var logs []*msgpbench.RedoLog
	for rest := data; ; {
		var rec []byte
		rec, rest, err = nextTicdcFrame(rest)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("%s: %w", src, err)
		}
		rl := new(msgpbench.RedoLog)
		if err := unmarshalTicdcRecord(rec, rl); err != nil {
			return 0, fmt.Errorf("%s: %w", src, err)
		}
		logs = append(logs, rl)
	}
	return sortAndWriteFile(path, logs, compareTicdcOrder, ticdcCommitTs, start, end, func(dst []byte, rl *msgpbench.RedoLog) []byte {
		dst, _ = appendTicdcFrame(dst, rl)
		return dst
	})
}

// ticdcCommitTs is a record's commit ts (ticdcTs's first half).
func ticdcCommitTs(rl *msgpbench.RedoLog) uint64 {
	ts, _ := ticdcTs(rl)
	return ts
}

// ticdcTs is a record's commit ts and start ts.
func ticdcTs(rl *msgpbench.RedoLog) (commit, start uint64) {
	if rl.Type == ticdcRedoDDL {
		if d := rl.RedoDDL.DDL; d != nil {
			return d.CommitTs, d.StartTs
		}
		return 0, 0
	}
	if r := rl.RedoRow.Row; r != nil {
		return r.CommitTs, r.StartTs
	}
	return 0, 0
}

// compareTicdcOrder is compareRedoOrder on TiCDC's records: commit ts,
// start ts, then delete < update < insert (a DDL ranks as a delete).
func compareTicdcOrder(a, b *msgpbench.RedoLog) int {
	ac, as := ticdcTs(a)
	bc, bs := ticdcTs(b)
	if c := cmp.Compare(ac, bc); c != 0 {
		return c
	}
	if c := cmp.Compare(as, bs); c != 0 {
		return c
	}
	return cmp.Compare(ticdcOpRank(a), ticdcOpRank(b))
}

func ticdcOpRank(rl *msgpbench.RedoLog) int {
	if rl.Type == ticdcRedoDDL {
		return 0
	}
	post, pre := len(rl.RedoRow.Columns) > 0, len(rl.RedoRow.PreColumns) > 0
	switch {
	case post && pre:
		return 1 // update
	case pre:
		return 0 // delete
	default:
		return 2 // insert
	}
}

// addRedoLog folds a record in TiCDC's shape into the digest with the
// identity add gives a codec event: commit ts, start ts, the table's
// physical ID (TableName.TableID) and, for a row, its first column's value
// when it is an int64 (codec's KindInt, which FromEvent turns into an
// int64 and msgpack keeps signed: the generated rows' unique id), or a
// DDL's query length. msgpack would carry a YEAR first column as an int64
// too, where add counts only KindInt: no log of the cells has one.
func (d *eventDigest) addRedoLog(rl *msgpbench.RedoLog) {
	ts, startTs := ticdcTs(rl)
	if rl.Type == ticdcRedoDDL {
		var query int
		if rl.RedoDDL.DDL != nil {
			query = len(rl.RedoDDL.DDL.Query)
		}
		d.addID(ts, startTs, rl.RedoDDL.TableName.TableID, uint64(query), true)
		return
	}
	var table int64
	if r := rl.RedoRow.Row; r != nil && r.Table != nil {
		table = r.Table.TableID
	}
	cols := rl.RedoRow.Columns
	if len(cols) == 0 {
		cols = rl.RedoRow.PreColumns
	}
	var key uint64
	if len(cols) > 0 {
		if v, ok := cols[0].Value.(int64); ok {
			key = uint64(v)
		}
	}
	d.addID(ts, startTs, table, key, false)
}

// nextTicdcSorted decodes c's next frame (TiCDC's framing, a msgp record)
// into c.rec; io.EOF at the end.
func nextTicdcSorted(c *sortedCursor[msgpbench.RedoLog]) error {
	var rec []byte
	var err error
	c.buf, rec, err = readTicdcFrame(c.r, c.buf)
	if err != nil {
		if err == io.EOF {
			return err
		}
		return fmt.Errorf("%s: %w", c.f.Name(), err)
	}
	if err := unmarshalTicdcRecord(rec, &c.rec); err != nil {
		return fmt.Errorf("%s: %w", c.f.Name(), err)
	}
	return nil
}

// mergeTicdcSorted merges the sorted files of TiCDC's records: it folds
// each record in (start, end], in order, into the digest it returns.
func mergeTicdcSorted(paths []string, start, end uint64) (*eventDigest, error) {
	d := &eventDigest{}
	err := mergeSorted(paths, nextTicdcSorted, compareTicdcOrder, func(rl *msgpbench.RedoLog) {
		if ts, _ := ticdcTs(rl); ts > start && ts <= end {
			d.addRedoLog(rl)
		}
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}
