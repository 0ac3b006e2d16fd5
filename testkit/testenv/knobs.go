package testenv

import (
	"os"
	"strconv"
	"testing"
)

// The REDOKIT_* knobs of the tests (scripts/test.sh documents the ones it
// sets) are read through Count and Seed, so that every knob is parsed and
// refused the same way.

// Count returns the count the environment variable name sets (a whole
// number, 0 or more), or def when it is unset or empty. A value that is not
// a count fails the test: a typo must not run the default in silence.
func Count(t testing.TB, name string, def int) int {
	t.Helper()
	n, ok := LookupCount(t, name)
	if !ok {
		return def
	}
	return n
}

// LookupCount is Count without a default: ok reports that name is set.
func LookupCount(t testing.TB, name string) (n int, ok bool) {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a count", name, v)
	}
	return n, true
}

// Seed returns the seed the environment variable name sets (an unsigned
// decimal number), or def when it is unset or empty, and logs it as
// "name=seed" so that a failing run can be replayed with it. A value that is
// not a number fails the test.
func Seed(t testing.TB, name string, def uint64) uint64 {
	t.Helper()
	seed := def
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q is not a seed (an unsigned decimal number)", name, v)
		}
		seed = n
	}
	t.Logf("%s=%d", name, seed)
	return seed
}

// InCI reports whether the tests run under CI (CI set to anything), where
// the knobs' defaults are larger.
func InCI() bool { return os.Getenv("CI") != "" }

// ByCI returns ci under CI (see InCI), else local: the default of a knob
// that runs longer in CI.
func ByCI(ci, local int) int {
	if InCI() {
		return ci
	}
	return local
}
