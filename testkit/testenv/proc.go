package testenv

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// ProcStatus reads a size field of /proc/self/status (VmRSS, VmHWM,
// VmData, …), in bytes; -1 where there is none (not Linux). The memory
// tests' children report their peaks with it.
func ProcStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return -1
}
