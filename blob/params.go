package blob

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize parses a byte count for a URL parameter: plain bytes or a number
// with a B, KiB, MiB or GiB suffix (K, M, G and KB, MB, GB are read as the
// binary units too; suffixes are case-insensitive). Zero and negative sizes
// are refused. The error names the parameter and matches ErrInvalidArgument.
func ParseSize(name, v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if len(s) > len(u.suffix) && strings.EqualFold(s[len(s)-len(u.suffix):], u.suffix) {
			s, mult = s[:len(s)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%w: %s=%q is not a positive size such as 8MiB", ErrInvalidArgument, name, v)
	}
	return n * mult, nil
}
