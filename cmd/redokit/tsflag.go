package main

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
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return errors.New("want a commit ts (a number) or an RFC 3339 time such as 2025-01-01T12:00:00Z")
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
