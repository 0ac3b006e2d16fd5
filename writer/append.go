package writer

import (
	"errors"
	"fmt"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/segment"
)

// appendStore is the local path (a backend that can append, driver.Appender).
//
// Frames are appended to the active segment (act), each flush's blocks and
// then its progress frame, and one fdatasync makes them durable. A segment
// is synced when it is rotated out, and sealed once the progress frame of
// the flush that filled it is durable (in its successor): a sealed segment
// never holds a block no progress frame covers, so the blocks a crash
// leaves unreported are all in active segments, after their last progress
// frame, where the next Open's recovery cuts them.
type appendStore struct {
	c *committer

	act      *activeSeg
	full     []*activeSeg     // rotated out, synced, to be sealed after the next publication
	unsynced []*blockTask     // frames not durable yet, in order: in act after its last sync unless broken
	prog     *pendingProgress // the flush's progress frame, appended after unsynced, not durable yet
	broken   bool             // an append, sync or seal failed: act must be rewound and unsynced written again
	ageTimer *time.Timer
}

// activeSeg is an active segment: appended to, or rotated out and waiting
// to be sealed.
type activeSeg struct {
	name         segment.Name
	key          string
	af           blob.AppendFile // nil once sealed or abandoned
	sw           *segment.Writer
	hdr          segment.Header
	syncedSize   int64 // bytes known durable
	syncedBlocks int   // blocks known durable
	syncedProg   int   // progress frames known durable
	writeback    int64 // bytes whose write-back has been started (startWriteback)
	// linked is set once the chain has moved past the segment (its blocks
	// are final): its successor links footerCRC, and the footer written
	// when it is sealed must have that CRC.
	linked    bool
	footerCRC uint32
}

// pendingProgress is a progress frame appended and not yet durable: written
// again, like the blocks, when a failed sync makes the segment rewind.
type pendingProgress struct {
	ts        uint64
	committed uint64
	spans     []segment.SpanTs
	seg       *activeSeg // where it was appended
	info      segment.ProgressInfo
}

// countingFile counts what reaches an append file.
type countingFile struct {
	blob.AppendFile
	n *Writer
}

func (c countingFile) Write(p []byte) (int, error) {
	n, err := c.AppendFile.Write(p)
	c.n.stats.stored.Add(int64(n))
	return n, err
}

func (s *appendStore) add(t *blockTask) error { return s.appendFrame(t) }

func (s *appendStore) canRecord() bool { return s.act != nil }

// record appends the flush's progress frame to the active segment, after
// its blocks.
func (s *appendStore) record(ts, committed uint64, spans []segment.SpanTs) error {
	if err := s.repair(); err != nil {
		return err
	}
	if s.prog != nil && s.prog.seg != nil {
		return nil // the repair wrote it
	}
	if s.act == nil {
		// The repair abandoned the segment the blocks were in and had none
		// to write again: the frame starts a segment of its own.
		if err := s.openActive(); err != nil {
			return err
		}
	}
	s.prog = &pendingProgress{ts: ts, committed: committed, spans: spans}
	return s.writeProgress()
}

// writeProgress appends the pending progress frame to the active segment.
func (s *appendStore) writeProgress() error {
	info, err := s.act.sw.AppendProgressCommitted(s.prog.ts, s.prog.committed, s.prog.spans)
	if err != nil {
		s.broken = true
		return err
	}
	s.prog.seg, s.prog.info = s.act, info
	return nil
}

// persist syncs the active segment: one fdatasync makes the flush's blocks
// and its progress frame durable.
func (s *appendStore) persist() error {
	return s.c.retry(s.syncActive)
}

// settle seals the segments rotated out during the flush, and at Close the
// active one: only now does a publication cover all of their blocks.
func (s *appendStore) settle(final bool) error {
	if err := s.c.retry(s.sealFull); err != nil {
		return err
	}
	if final {
		return s.c.retry(s.sealActive)
	}
	return nil
}

func (s *appendStore) age() <-chan time.Time {
	if s.ageTimer == nil {
		return nil
	}
	return s.ageTimer.C
}

// aged seals the active segment once it is MaxSegmentAge old. The committer
// calls it between flushes, when every block is published.
func (s *appendStore) aged() error {
	s.ageTimer = nil
	return s.c.retry(s.sealActive)
}

// doomed closes and returns the open segments whose seq the fence leaves
// out.
func (s *appendStore) doomed(epoch, lastSeq uint64) []string {
	var out []string
	for _, a := range append(s.full, s.act) {
		if a == nil || a.af == nil || a.hdr.Epoch != epoch || a.hdr.Seq <= lastSeq {
			continue
		}
		a.af.Close()
		a.af = nil
		out = append(out, a.key)
	}
	return out
}

// appendFrame appends a frame to the active segment. It is retried until it
// succeeds: a call after a failure first repairs the segment, which writes
// the frame again if it was already queued.
func (s *appendStore) appendFrame(t *blockTask) error {
	if err := s.repair(); err != nil {
		return err
	}
	if t.queued {
		return nil // the repair wrote it
	}
	if err := s.prepareFor(t); err != nil {
		return err
	}
	// Nothing is synced before the flush's one sync: syncing piece by
	// piece would cost syncs the flush did not ask for, and a failed sync
	// writes the blocks again (repair, from the job's events).
	return s.write(t)
}

// prepareFor makes the active segment ready to take t. It rotates when t
// would take the segment past the size limit, when t starts below its last
// record (the catch-up of a span added behind the writer, or events below
// what a stage cut stored), or when t's flush may hold copies of events
// of the epoch (FlagCatchUp) and the segment may not, or the other way
// round: the full segment is synced and set aside to be sealed after the
// next publication. It opens a new segment when there is none.
func (s *appendStore) prepareFor(t *blockTask) error {
	if a := s.act; a != nil && len(a.sw.Blocks()) > 0 {
		last, _ := a.sw.LastTs()
		catchUp := t.job != nil && (a.hdr.Flags^t.job.flags)&segment.FlagCatchUp != 0
		if catchUp || t.frame.Info().MinTs < last || a.sw.Offset()+int64(t.frame.Len()) > s.c.w.o.MaxSegmentBytes {
			if err := s.syncActive(); err != nil {
				return err
			}
			// Synced: its blocks are final, and the next segment links
			// them.
			a.footerCRC, a.linked = s.c.extend(a.hdr, a.sw.Blocks()[:a.syncedBlocks]), true
			s.full = append(s.full, a)
			s.act = nil
			s.stopAge()
		}
	}
	if s.act == nil {
		return s.openActive()
	}
	return nil
}

// write queues t for a redo and appends it to the active segment.
func (s *appendStore) write(t *blockTask) error {
	t.queued = true
	s.unsynced = append(s.unsynced, t)
	a := s.act
	if err := a.sw.AppendFrame(&t.frame); err != nil {
		s.broken = true
		return err
	}
	if t.job != nil {
		blocks := a.sw.Blocks()
		t.stored.key, t.stored.off, t.stored.n = a.key, blocks[len(blocks)-1].Offset, t.frame.Len()
		t.release() // a repair reads it back (readBack)
	}
	s.startWriteback(a)
	return nil
}

// writebackChunk is how many bytes appended since the last sync may wait in
// the page cache before the local path starts writing them out
// (blob.WritebackStarter). Without it, every sync (a flush's, and a
// rotation's, which holds up the committer while the producer fills the
// arena) writes out all that was appended since the last one, up to a
// segment; with it the disk works while the next blocks are built, and a
// sync waits for about the last chunk.
const writebackChunk = 4 << 20

// startWriteback starts the write-out of a's bytes once a chunk of them is
// waiting. It is a hint: a failure only means that the next sync does the
// work, and that sync reports any write-back error.
func (s *appendStore) startWriteback(a *activeSeg) {
	from, to := max(a.writeback, a.syncedSize), a.sw.Offset()
	if s.c.w.o.Sync != SyncEveryFlush || to-from < writebackChunk {
		return
	}
	ws, ok := a.af.(blob.WritebackStarter)
	if !ok {
		return
	}
	if err := ws.StartWriteback(from, to-from); err != nil {
		s.c.w.log.Debug("starting write-back failed; the next sync writes the bytes out", "key", a.key, "err", err)
	}
	a.writeback = to
}

// readBack takes back the frames of unsynced that were let go of once
// written, from the segments they were written to, before a repair cuts
// those back. Each must parse with its CRC: after a failed fsync the kernel
// may have dropped the pages, and what the file then holds is not what was
// written. A read that fails is retried with the repair; bytes that are
// not the frame are a permanent error naming the segment and offset (the
// flush's events are no longer in memory to build it again: the writer
// stops, and a new epoch goes on from the flushed ts).
func (s *appendStore) readBack() error {
	w := s.c.w
	for _, t := range s.unsynced {
		if t.frame.Bytes() != nil {
			continue
		}
		at := t.stored
		b, err := w.b.ReadRange(s.c.ctx, at.key, at.off, int64(at.n))
		if err != nil {
			return fmt.Errorf("writer: reading back block at offset %d of %s after a failed write or sync: %w", at.off, at.key, err)
		}
		buf := append(t.pools.getFrame(), b...)
		f, err := segment.ParseFrame(at.key, at.off, buf)
		if err != nil {
			return permanent{fmt.Errorf("writer: block at offset %d of %s is not what was written there before a failed write or sync (the kernel may have dropped it), and its events are no longer in memory: %w", at.off, at.key, err)}
		}
		t.frame = f
	}
	return nil
}

// openActive starts a new active segment.
func (s *appendStore) openActive() error {
	w := s.c.w
	hdr, err := s.c.nextHeader()
	if err != nil {
		return err
	}
	name := hdr.ActiveName()
	key := name.Format()
	af, err := w.b.OpenAppend(s.c.ctx, key)
	if err != nil {
		return err
	}
	if size := af.Size(); size != 0 {
		// Only this process writes names of this epoch, and no progress
		// covers this seq: the file is a leftover of a failed attempt (a
		// header write, or a dropped segment whose delete failed). Skipping
		// the seq would break the chain; start it over.
		w.log.Warn("new active segment is not empty; cutting it", "key", key, "size", size)
		if err := af.Truncate(0); err != nil {
			af.Close()
			return fmt.Errorf("writer: new active segment %s is not empty (%d bytes) and cannot be cut: %w", key, size, err)
		}
	}
	sw, err := segment.NewWriter(countingFile{af, w}, hdr, nil)
	if err != nil {
		af.Close()
		w.b.Delete(s.c.ctx, key)
		return err
	}
	s.c.nextSeq++
	s.act = &activeSeg{name: name, key: key, af: af, sw: sw, hdr: sw.Header()}
	if w.o.MaxSegmentAge > 0 {
		s.ageTimer = time.NewTimer(w.o.MaxSegmentAge)
	}
	w.log.Debug("segment opened", "key", key)
	return nil
}

// syncActive makes everything appended to the active segment durable.
func (s *appendStore) syncActive() error {
	if err := s.repair(); err != nil {
		return err
	}
	a := s.act
	if a == nil || a.af == nil || a.syncedSize == a.sw.Offset() {
		return nil
	}
	if s.c.w.o.Sync == SyncEveryFlush {
		start := time.Now()
		err := a.af.Sync()
		s.c.w.stats.fsync.since(start)
		if err != nil {
			s.broken = true
			return err
		}
	}
	s.markSynced(a)
	return nil
}

// markSynced records that everything appended to a is durable.
func (s *appendStore) markSynced(a *activeSeg) {
	a.syncedSize = a.sw.Offset()
	a.syncedBlocks = len(a.sw.Blocks())
	a.syncedProg = len(a.sw.Progress())
	if p := s.prog; p != nil && p.seg == a {
		s.c.recorded(a.hdr, p.info)
		s.prog = nil
	}
	for _, t := range s.unsynced {
		t.release()
	}
	clear(s.unsynced)
	s.unsynced = s.unsynced[:0]
}

// sealFull seals the segments set aside at rotation. It runs once the
// flush's progress frame is durable in a later segment: it covers every
// block they hold.
func (s *appendStore) sealFull() error {
	for len(s.full) > 0 {
		if err := s.seal(s.full[0]); err != nil {
			return err
		}
		s.full[0] = nil
		s.full = s.full[1:]
	}
	s.full = nil
	return nil
}

// sealActive seals the active segment (at Close, or when it is old), after
// syncing it. Every block in it is covered by its last progress frame, and
// that frame is published first: the next epoch reads progress frames only
// in active segments and in seqs above the published one, so a sealed
// segment's newest frame must not be newer than the state object.
func (s *appendStore) sealActive() error {
	if err := s.syncActive(); err != nil {
		return err
	}
	a := s.act
	if a == nil {
		return nil
	}
	if a.syncedProg > 0 {
		if err := s.c.publishNow(); err != nil {
			return err
		}
	}
	if err := s.seal(a); err != nil {
		return err
	}
	if a.syncedBlocks == 0 && a.syncedProg == 0 {
		s.c.unuse(a.hdr.Seq) // deleted
	} else if !a.linked {
		a.footerCRC, a.linked = s.c.extend(a.hdr, a.sw.Blocks()[:a.syncedBlocks]), true
	}
	s.act = nil
	s.stopAge()
	return nil
}

// seal writes a synced segment's footer and renames it to its sealed name
// (AppendFile.Seal syncs the file and the directory). A segment without
// blocks is deleted instead. After a failure the footer is cut off again, so
// that the retry starts over; a segment that cannot even be cut is left
// unsealed with its synced blocks, for the next Open to recover.
func (s *appendStore) seal(a *activeSeg) error {
	w := s.c.w
	if a.af == nil {
		return nil // abandoned
	}
	if a.syncedBlocks == 0 && a.syncedProg == 0 {
		a.af.Close()
		a.af = nil
		return w.b.Delete(s.c.ctx, a.key)
	}
	f, err := a.sw.Seal()
	if err == nil && a.linked && f.CRC != a.footerCRC {
		// The successor links the footer of the blocks this segment had at
		// rotation; sealing another would break the chain for good.
		err = permanent{fmt.Errorf("writer: seal %s: its footer's CRC is %#08x, but its successor links %#08x (%d blocks)", a.key, f.CRC, a.footerCRC, len(f.Blocks))}
	}
	if err == nil {
		start := time.Now()
		final := a.hdr.SealedName(f.MinTs, f.MaxTs).Format()
		if _, err = a.af.Seal(s.c.ctx, final); err == nil {
			w.stats.fsync.since(start)
			a.af = nil
			w.stats.segments.Add(1)
			w.log.Debug("segment sealed", "key", final, "blocks", len(f.Blocks), "min_ts", f.MinTs, "max_ts", f.MaxTs)
			return nil
		}
	}
	if rerr := s.rewind(a); rerr != nil {
		w.log.Warn("abandoning a segment that cannot be sealed; the next open recovers it", "key", a.key, "err", rerr)
		a.af.Close()
		a.af = nil
	}
	return err
}

// rewind cuts a segment back to its last sync and resumes its writer there.
func (s *appendStore) rewind(a *activeSeg) error {
	if err := a.af.Truncate(a.syncedSize); err != nil {
		return err
	}
	a.writeback = a.syncedSize
	sw, err := segment.ResumeWriter(countingFile{a.af, s.c.w}, a.hdr, a.sw.Blocks()[:a.syncedBlocks], a.sw.Progress()[:a.syncedProg], a.syncedSize, nil)
	if err != nil {
		return err
	}
	a.sw = sw
	return nil
}

func (s *appendStore) stopAge() {
	if s.ageTimer != nil {
		s.ageTimer.Stop()
		s.ageTimer = nil
	}
}

// repair rewinds the active segment to its last durable point after a
// failure and appends the frames that were not durable again. When the
// segment cannot be rewound it is abandoned, unsealed, with its durable
// prefix (the next Open recovers it), and the frames go to a new segment.
// Redoing the frames, rather than syncing again, matters: after a failed
// fsync the kernel may have dropped the dirty pages, and a second fsync that
// succeeds proves nothing about them.
func (s *appendStore) repair() error {
	if !s.broken {
		return nil
	}
	w := s.c.w
	// First, while every frame is still where it was written.
	if err := s.readBack(); err != nil {
		var p permanent
		if a := s.act; errors.As(err, &p) && a != nil && a.af != nil {
			// The writer stops here: leave the segment at its
			// durable point, not with what the failed sync left
			// after it, which a reader would take for corruption
			// (bad bytes with a good block after them).
			if rerr := s.rewind(a); rerr != nil {
				w.log.Warn("cannot cut a segment back to its durable point; the next open recovers it", "key", a.key, "err", rerr)
			}
		}
		return err
	}
	if a := s.act; a != nil {
		if a.syncedBlocks == 0 && a.syncedProg == 0 {
			// Nothing durable: drop the segment; the frames go to a new
			// one under the next seq.
			a.af.Close()
			if err := w.b.Delete(s.c.ctx, a.key); err != nil {
				w.log.Warn("cannot delete a failed segment", "key", a.key, "err", err)
			}
			s.c.unuse(a.hdr.Seq)
			s.act = nil
		} else if err := s.rewind(a); err != nil {
			// Its durable blocks are final: the next segment links them,
			// and the next Open's recovery seals exactly those (the link
			// tells it which, whatever else reached the file).
			w.log.Warn("abandoning an active segment that cannot be rewound; the next open recovers it", "key", a.key, "err", err)
			a.af.Close()
			a.af = nil
			a.footerCRC, a.linked = s.c.extend(a.hdr, a.sw.Blocks()[:a.syncedBlocks]), true
			s.act = nil
		}
		if s.act == nil {
			s.stopAge()
		}
	}
	s.broken = false
	if s.prog != nil {
		s.prog.seg = nil // written again below
	}
	redo := s.unsynced
	s.unsynced = nil
	for i, t := range redo {
		if err := s.prepareFor(t); err != nil {
			s.unsynced = append(s.unsynced, redo[i:]...)
			s.broken = true
			return err
		}
		if err := s.write(t); err != nil {
			s.unsynced = append(s.unsynced, redo[i+1:]...)
			return err
		}
	}
	if s.prog != nil {
		if s.act == nil {
			if err := s.openActive(); err != nil {
				s.prog.seg = nil
				s.broken = true
				return err
			}
		}
		return s.writeProgress()
	}
	return nil
}

// abandon closes the segments unsealed when the committer stops without
// sealing them (an abort, or a fatal error).
func (s *appendStore) abandon() {
	s.stopAge()
	for _, a := range append(s.full, s.act) {
		if a != nil && a.af != nil {
			a.af.Close()
			a.af = nil
		}
	}
	s.full, s.act = nil, nil
	for _, t := range s.unsynced {
		t.release()
	}
	s.unsynced = nil
	s.prog = nil
}
