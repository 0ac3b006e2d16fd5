package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalidEvent: an Event holds something its encoding would carry but
// DecodeEvent rejects. CheckEvent returns it.
var ErrInvalidEvent = errors.New("invalid event")

// CheckEvent reports whether ev encodes to bytes that DecodeEvent accepts,
// and if not, names the first field that stops it, as DecodeEvent would name
// it ("columns[3].value"). AppendEvent cannot fail, so it writes whatever ev
// holds: a writer that stores events must call CheckEvent before it
// acknowledges one, or it acknowledges an event no reader can read.
//
// What it rejects: an event kind other than RowEvent and DDLEvent, a table
// role above RoleDropped, and a date, datetime, timestamp or duration value
// built from a DateTime or Duration that is not Valid. Nothing else an Event
// can hold fails to decode. It allocates only for its error.
func CheckEvent(ev *Event) error {
	_, err := CheckedLen(ev)
	return err
}

// CheckedLen is CheckEvent and EncodedLen in one pass over the event's
// columns, for a writer that needs both for every event it takes: the
// length of ev's encoding if CheckEvent accepts ev, else CheckEvent's error
// (and no length). Unlike EncodedLen it does not panic on an unknown kind.
func CheckedLen(ev *Event) (int, error) {
	switch ev.Kind {
	case RowEvent:
		r := &ev.Row
		n := headerLen + uvarintLen(r.CommitTs-r.StartTs) + tableLen(&r.Table) +
			uvarintLen(uint64(len(r.Columns))) + uvarintLen(uint64(len(r.PreColumns)))
		for s, cols := range [2][]Column{r.Columns, r.PreColumns} {
			for i := range cols {
				c := &cols[i]
				n += columnLen(c)
				if !valueOK(&c.Value) {
					return 0, invalid(sectionNames[inColumns+s]+"["+strconv.Itoa(i)+"].value", checkValue(&c.Value))
				}
			}
		}
		return n, nil
	case DDLEvent:
		for i, t := range ev.DDL.Tables {
			if t.Role > maxRole {
				return 0, invalid("tables["+strconv.Itoa(i)+"].role", "unknown table role "+strconv.Itoa(int(t.Role)))
			}
		}
		return EncodedLen(ev), nil
	}
	return 0, invalid("kind", "unknown event kind "+strconv.Itoa(int(ev.Kind)))
}

// valueOK is checkValue(v) == "" by the decoder's fast verdicts (no
// division at fsp 6, no message): only dates, times and durations can hold
// what does not decode.
func valueOK(v *Value) bool {
	switch v.kind {
	case KindDate, KindDatetime, KindTimestamp:
		return packedDateTimeOK(v.kind, v.num)
	case KindDuration:
		return packedDurationOK(v.num)
	}
	return true
}

func checkValue(v *Value) string {
	switch v.kind {
	case KindDate, KindDatetime, KindTimestamp:
		if msg := checkPackedDateTime(v.kind, v.num); msg != "" {
			return v.kind.String() + ": " + msg
		}
	case KindDuration:
		if msg := checkPackedDuration(v.num); msg != "" {
			return "duration: " + msg
		}
	}
	return ""
}

func invalid(field, msg string) error {
	return fmt.Errorf("codec: %s: %w: %s", field, ErrInvalidEvent, msg)
}

// CheckRecord checks that src, the payload of a log record, begins an event
// of the record's kind and commit ts, reading only the 10 bytes of the
// event's header: the check a reader that does not decode (a raw copy) still
// owes, since a record whose kind or commit ts is not its event's would be
// merged, filtered and applied under the wrong ts. The error is a
// *DecodeError: version, kind (offset 1) or commit_ts (offset 2), with
// ErrMalformed for a mismatch.
func CheckRecord(src []byte, kind EventKind, commitTs uint64) error {
	if err := checkHeader(src); err != nil {
		return err
	}
	if k := EventKind(src[1]); k != kind {
		return &DecodeError{1, "kind", fmt.Errorf("%w: the event is a %v, its record a %v", ErrMalformed, k, kind)}
	}
	if ts := binary.LittleEndian.Uint64(src[2:headerLen]); ts != commitTs {
		return &DecodeError{2, "commit_ts", fmt.Errorf("%w: the event's commit ts is %d, its record's %d",
			ErrMalformed, ts, commitTs)}
	}
	return nil
}
