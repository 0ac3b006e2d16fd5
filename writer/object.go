package writer

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/segment"
)

// objectStore is the object-store path (a backend that cannot append).
//
// A flush's frames are copied into a segment object assembled in memory.
// When the next frame would take it past MaxSegmentBytes (or starts below
// its last record: a catch-up), the object is sealed and its upload starts on
// a goroutine of its own, while the committer assembles the next one; at
// most MaxUploads objects are launched and not yet durable at once, and the
// committer waits for a slot before it launches another. A flush's last
// object ends with the flush's progress frame and is launched at its end,
// once every other object of the flush is durable (when some are still
// uploading, the frame goes alone into an object of its own: see record),
// and the flush is reported only once every upload is durable (persist), so
// the progress never covers an object that is not stored, and no upload
// outlives a flush that succeeds. The state object is published later, by
// the publisher, while the next flush's objects upload. When a flush fails
// for good (or Close gives up) the writer cancels the uploads still under
// way and waits for them as it stops; what they stored holds no durable
// progress frame the next epoch can find after an unbroken chain, so its
// fence leaves it out.
//
// An upload makes one attempt per launch. A failed attempt's error goes to
// the committer's retry loop (the next addToObject or putObject returns it),
// which backs off and calls again; that call starts the failed uploads again,
// with the same bytes under the same name.
type objectStore struct {
	c *committer

	obj      *objectSeg
	uploads  []*upload       // segment objects launched and not known durable yet, in seq order
	finished chan *upload    // upload attempts that returned; capacity MaxUploads
	segBufs  []*bytes.Buffer // free segment buffers
	stored   []upload        // objects put since the last publication known (those a fence may leave out)
	prog     *objectProgress // the flush's progress frame, in an object not yet durable
}

// objectProgress is the progress frame recorded in a segment object.
type objectProgress struct {
	hdr  segment.Header
	info segment.ProgressInfo
}

// objectSeg is the segment object being assembled.
type objectSeg struct {
	hdr      segment.Header // as written: its CRC is the segment's digest
	sw       *segment.Writer
	buf      *bytes.Buffer
	sealed   bool
	chainMax uint64 // chain max ts through this segment, once sealed
}

func (s *objectStore) add(t *blockTask) error { return s.addToObject(t) }

func (s *objectStore) canRecord() bool { return s.obj != nil && !s.obj.sealed }

// record ends the flush's last object with its progress frame. The frame
// may only be stored once every object below it is (see putObject): when
// earlier objects of the flush are still uploading, the flush's last blocks
// are launched now in an object of their own, and the frame goes into a
// small object of its own, launched once they all landed, so that no upload
// of blocks waits for the others. A flush of one object is one object.
func (s *objectStore) record(ts, committed uint64, spans []segment.SpanTs) error {
	if err := s.awaitUploads(len(s.uploads)); err != nil {
		return err // collects the uploads that landed, without waiting
	}
	if o := s.obj; o.sealed || len(s.uploads) > 0 && o.sw.Stats().Blocks > 0 {
		if err := s.launch(); err != nil {
			return err // the object stays, sealed: the retry launches it
		}
		if err := s.openObject(); err != nil {
			return err
		}
	}
	o := s.obj
	info, err := o.sw.AppendProgressCommitted(ts, committed, spans)
	if err != nil {
		return err
	}
	s.prog = &objectProgress{hdr: o.hdr, info: info}
	return nil
}

// persist launches the flush's last object and waits for every object of
// the flush: the progress must never be reported while an object it covers
// is not stored, whatever order the uploads finish in.
func (s *objectStore) persist() error {
	if err := s.c.retry(s.putObject); err != nil {
		return err
	}
	if p := s.prog; p != nil {
		s.c.recorded(p.hdr, p.info)
		s.prog = nil
	}
	return nil
}

// settle has nothing to do: each object was sealed before its upload.
func (s *objectStore) settle(final bool) error { return nil }

func (s *objectStore) age() <-chan time.Time { return nil }
func (s *objectStore) aged() error           { return nil }

// doomed returns the objects stored in this epoch whose seq the fence
// leaves out.
func (s *objectStore) doomed(epoch, lastSeq uint64) []string {
	var out []string
	pub := s.c.pub.publishedSeq()
	for _, u := range s.stored {
		if s.c.w.epoch == epoch && u.seq > lastSeq && u.seq > pub {
			out = append(out, u.key)
		}
	}
	s.stored = nil
	return out
}

// abandon ends the uploads still under way, which belong to a flush that
// failed or was given up, and waits for them, so that no goroutine of the
// writer outlives Close.
func (s *objectStore) abandon() {
	running := 0
	for _, u := range s.uploads {
		if u.running {
			running++
		}
	}
	if running > 0 {
		s.c.w.cancel()
		for range running {
			<-s.finished
		}
	}
}

// upload is one segment object on its way to the store.
type upload struct {
	key     string
	seq     uint64
	buf     *bytes.Buffer
	running bool  // an attempt is under way (the committer's view)
	err     error // the attempt's result: set by its goroutine before it reports on finished

	chainMax uint64 // chain max ts through this segment
	digest   uint32 // its header CRC
}

// addToObject adds a frame to the segment object being assembled, launching
// the object's upload first when the frame would take it past the size
// limit. It is retried until it succeeds: an error leaves t out of every
// object, and a call after a failure first starts the failed uploads again.
func (s *objectStore) addToObject(t *blockTask) error {
	w := s.c.w
	if o := s.obj; o != nil && (o.sealed || o.sw.Stats().Blocks > 0 && s.rotates(o, t)) {
		if err := s.launch(); err != nil {
			return err
		}
	} else if err := s.awaitUploads(w.o.MaxUploads); err != nil {
		return err
	}
	if s.obj == nil {
		if err := s.openObject(); err != nil {
			return err
		}
	}
	// Writing to memory cannot fail.
	if err := s.obj.sw.AppendFrame(&t.frame); err != nil {
		return err
	}
	t.release()
	return nil
}

// openObject starts the next segment object.
func (s *objectStore) openObject() error {
	hdr, err := s.c.nextHeader()
	if err != nil {
		return err
	}
	buf := s.segBuf()
	sw, err := segment.NewWriter(buf, hdr, nil)
	if err != nil {
		s.segBufs = append(s.segBufs, buf)
		return err
	}
	s.c.nextSeq++
	s.obj = &objectSeg{hdr: sw.Header(), sw: sw, buf: buf}
	return nil
}

// rotates reports whether t must go to a new segment object: it would take
// o past the size limit, or it starts below o's last record.
func (s *objectStore) rotates(o *objectSeg, t *blockTask) bool {
	last, _ := o.sw.LastTs()
	return t.frame.Info().MinTs < last || o.sw.Offset()+int64(t.frame.Len())+footerReserve(o.sw) > s.c.w.o.MaxSegmentBytes
}

// footerReserve is what the footer and trailer of sw will take with one more
// block.
func footerReserve(sw *segment.Writer) int64 {
	return int64(segment.FooterFixedSize + 4 + (len(sw.Blocks())+1)*segment.IndexEntrySize + segment.TrailerSize)
}

// segBuf returns an empty buffer for a segment object. At most MaxUploads+1
// exist: the uploads' and the one being assembled.
func (s *objectStore) segBuf() *bytes.Buffer {
	if n := len(s.segBufs); n > 0 {
		b := s.segBufs[n-1]
		s.segBufs[n-1] = nil
		s.segBufs = s.segBufs[:n-1]
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

// putObject launches the flush's last segment object, if any, and waits
// until every object launched is durable. It is retried until it succeeds.
//
// The last object holds the flush's progress frame, and is launched only
// once every object below it is durable: a stored frame then proves that its
// whole chain was stored, and the next epoch reads a missing seq below a
// frame as data lost, never as an upload that failed (see durableProgress).
// record keeps that wait short: the object waiting then holds the frame
// alone.
func (s *objectStore) putObject() error {
	if s.obj != nil {
		if s.prog != nil && s.prog.hdr.Seq == s.obj.hdr.Seq {
			if err := s.awaitUploads(0); err != nil {
				return err
			}
		}
		if err := s.launch(); err != nil {
			return err
		}
	}
	return s.awaitUploads(0)
}

// launch seals the object being assembled, waits for an upload slot and
// starts its upload. After an error the object stays, sealed, in s.obj, and
// the next call launches it.
func (s *objectStore) launch() error {
	o := s.obj
	if !o.sealed {
		f, err := o.sw.Seal()
		if err != nil {
			return err
		}
		o.sealed = true
		// Sealed in memory: final, whenever and in whatever order the
		// uploads land. The next object links it.
		s.c.extend(o.hdr, f.Blocks)
		o.chainMax = s.c.chain.PrevMaxTs
	}
	if err := s.awaitUploads(s.c.w.o.MaxUploads - 1); err != nil {
		return err
	}
	st := o.sw.Stats()
	u := &upload{key: o.hdr.SealedName(st.MinTs, st.MaxTs).Format(), seq: o.hdr.Seq, buf: o.buf, chainMax: o.chainMax, digest: o.hdr.CRC}
	s.uploads = append(s.uploads, u)
	s.obj = nil
	s.attempt(u)
	return nil
}

// awaitUploads collects the upload attempts that returned, starts again the
// uploads whose failure an earlier call reported, and waits until at most
// limit uploads are not durable. It returns the first failure it sees; the
// caller's retry loop backs off and calls again.
func (s *objectStore) awaitUploads(limit int) error {
	if len(s.uploads) == 0 {
		return nil
	}
	var failed error
	for more := true; more; {
		select {
		case u := <-s.finished:
			if err := s.uploaded(u); err != nil && failed == nil {
				failed = err
			}
		default:
			more = false
		}
	}
	if failed != nil {
		return failed
	}
	for _, u := range s.uploads {
		if !u.running {
			s.attempt(u)
		}
	}
	for len(s.uploads) > limit {
		select {
		case u := <-s.finished:
			if err := s.uploaded(u); err != nil {
				return err
			}
		case <-s.c.ctx.Done():
			return s.c.aborted()
		}
	}
	return nil
}

// attempt starts one attempt at storing u.
func (s *objectStore) attempt(u *upload) {
	if s.finished == nil {
		// Every upload in s.uploads has at most one attempt under way, so
		// the reports never block, even after the committer stopped
		// listening.
		s.finished = make(chan *upload, s.c.w.o.MaxUploads)
	}
	w, ctx, finished := s.c.w, s.c.ctx, s.finished
	data := u.buf.Bytes()
	u.running = true
	go func() {
		start := time.Now()
		err := putSegment(ctx, w.b, u.key, data)
		w.stats.upload.since(start)
		u.err = err
		finished <- u
	}()
}

// uploaded takes the result of an attempt. A durable object counts as stored
// and unpublished, and its buffer is free for the next object; a failure is
// returned, and the upload stays to be tried again.
func (s *objectStore) uploaded(u *upload) error {
	u.running = false
	if u.err != nil {
		return u.err
	}
	w := s.c.w
	n := int64(u.buf.Len())
	w.stats.stored.Add(n)
	w.stats.segments.Add(1)
	// Objects at or below the published seq are below any fence (a fence
	// is at least what its epoch published): only the others are kept.
	pub := s.c.pub.publishedSeq()
	s.stored = slices.DeleteFunc(s.stored, func(x upload) bool { return x.seq <= pub })
	s.stored = append(s.stored, upload{key: u.key, seq: u.seq})
	s.uploads = slices.DeleteFunc(s.uploads, func(x *upload) bool { return x == u })
	s.segBufs = append(s.segBufs, u.buf)
	u.buf = nil
	return nil
}

// putSegment puts a sealed segment object, if-not-exists. It runs on an
// upload's goroutine.
func putSegment(ctx context.Context, b *blob.Bucket, key string, data []byte) error {
	_, err := b.Put(ctx, key, data, &blob.PutOptions{IfNotExist: true})
	if blob.IsPreconditionFailed(err) {
		// Only this epoch writes this name: an earlier attempt whose answer
		// was lost may have stored it. If it holds exactly these bytes, that
		// attempt succeeded.
		got, rerr := b.ReadAll(ctx, key)
		switch {
		case rerr != nil:
			return rerr
		case !bytes.Equal(got, data):
			// Only a second process with this epoch could have written
			// it, which the lease rules out: never overwrite, stop.
			return permanent{fmt.Errorf("writer: segment %s exists with other contents: %w", key, err)}
		}
		err = nil
	}
	return err
}
