package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine describes where a run happened.
type Machine struct {
	Date           string  `json:"date"`
	Host           string  `json:"host"`
	CPU            string  `json:"cpu"`
	Cores          int     `json:"cores"`
	GOMAXPROCS     int     `json:"gomaxprocs"`
	MemGiB         float64 `json:"mem_gib"`
	Kernel         string  `json:"kernel"`
	Go             string  `json:"go"`
	OS             string  `json:"os"`
	Dir            string  `json:"dir"`        // where local backends write
	FS             string  `json:"filesystem"` // its file system type and device
	DiskRotational string  `json:"disk_rotational,omitempty"`
	LoadStart      string  `json:"load_start"` // /proc/loadavg at start
	LoadEnd        string  `json:"load_end"`
}

func readMachine(dir string) Machine {
	m := Machine{
		Date:       time.Now().UTC().Format(time.RFC3339),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
		Dir:        dir,
		LoadStart:  loadavg(),
	}
	m.Host, _ = os.Hostname()
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemGiB = kb / (1 << 20)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.FS, m.DiskRotational = fsOf(dir)
	return m
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// fsOf finds the mount that holds dir in /proc/mounts (the longest mount
// point that prefixes it) and says its type, device and options, and whether
// the block device is rotational.
func fsOf(dir string) (desc, rotational string) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown (" + err.Error() + ")", ""
	}
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "statfs type 0x" + strconv.FormatInt(int64(st.Type), 16), ""
	}
	best := ""
	var dev, typ, opts string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		mp := f[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/") || mp == "/") && len(mp) >= len(best) {
			best, dev, typ, opts = mp, f[0], f[2], f[3]
		}
	}
	if len(opts) > 60 {
		opts = opts[:60] + "…"
	}
	desc = typ + " on " + dev + " mounted at " + best + " (" + opts + ")"
	if strings.HasPrefix(dev, "/dev/") {
		name := strings.TrimPrefix(dev, "/dev/")
		// A partition's queue is its disk's: strip trailing digits (vda1 → vda).
		for _, n := range []string{name, strings.TrimRight(name, "0123456789")} {
			if r, err := os.ReadFile("/sys/block/" + n + "/queue/rotational"); err == nil {
				if strings.TrimSpace(string(r)) == "1" {
					rotational = "rotational (HDD)"
				} else {
					rotational = "non-rotational (SSD/NVMe/virtual)"
				}
				break
			}
		}
	}
	return desc, rotational
}

// peakRSS returns the process's peak resident set size (VmHWM) in bytes,
// or from getrusage when /proc is missing.
func peakRSS() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb << 10
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		return int64(ru.Maxrss) << 10 // KiB on Linux
	}
	return 0
}
