package cli

import (
	"errors"
	"strconv"
	"time"
)

// tsValue is a --start-ts/--end-ts value: a commit ts (a TSO) as a number, or
// an RFC 3339 time, which stands for the first TSO of its millisecond — the
// physical milliseconds shifted left by 18 bits, as tsTime reads a TSO back.
type tsValue struct{ ts *uint64 }

func (v tsValue) String() string {
	if v.ts == nil {
		return "0"
	}
	return strconv.FormatUint(*v.ts, 10)
}

func (v tsValue) Type() string { return "ts" }

func (v tsValue) Set(s string) error {
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		*v.ts = n
		return nil
	}
	t, err := parseTime(s)
	if err != nil {
		return errors.New("want a commit ts (a number) or an RFC 3339 time such as 2025-01-01T12:00:00Z (a time without a zone is UTC)")
	}
	ts, err := timeTS(t)
	if err != nil {
		return err
	}
	*v.ts = ts
	return nil
}

// timeTS is the TSO of the first instant of t's millisecond.
func timeTS(t time.Time) (uint64, error) {
	ms := t.UnixMilli()
	if ms < 0 || ms >= 1<<46 {
		return 0, errors.New("the time is outside what a TSO holds (1970 to 4199)")
	}
	return uint64(ms) << 18, nil
}

// zonelessLayouts are the times without a zone a ts flag takes, as UTC: an
// operator who types the time a log line shows should not have to add a Z,
// and UTC is what every time redokit prints is in.
var zonelessLayouts = []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"}

// parseTime reads an RFC 3339 time, or one of zonelessLayouts as UTC.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		return t, nil
	}
	for _, l := range zonelessLayouts {
		if t, lerr := time.ParseInLocation(l, s, time.UTC); lerr == nil {
			return t, nil
		}
	}
	return time.Time{}, err
}
