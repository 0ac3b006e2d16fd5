package blob_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/blob/driver"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"100": 100, "100B": 100, "8MiB": 8 << 20, "8mib": 8 << 20, "512KiB": 512 << 10, "1GiB": 1 << 30, " 2 M ": 2 << 20, "3KB": 3 << 10} {
		if got, err := blob.ParseSize("part_size", in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "MiB", "1.5MiB", "9999999999GiB", "x"} {
		_, err := blob.ParseSize("part_size", in)
		if !errors.Is(err, blob.ErrInvalidArgument) || !strings.Contains(err.Error(), "part_size") {
			t.Errorf("ParseSize(%q) = %v, want an invalid-argument error naming the parameter", in, err)
		}
	}
}

func TestExactReader(t *testing.T) {
	got, err := io.ReadAll(driver.ExactReader(bytes.NewReader([]byte("hello")), 5))
	if err != nil || string(got) != "hello" {
		t.Fatalf("exact: %q %v", got, err)
	}
	if _, err := io.ReadAll(driver.ExactReader(bytes.NewReader([]byte("hell")), 5)); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("short: %v", err)
	}
	if _, err := io.ReadAll(driver.ExactReader(bytes.NewReader([]byte("hello!")), 5)); !errors.Is(err, blob.ErrInvalidArgument) {
		t.Fatalf("long: %v", err)
	}
}
