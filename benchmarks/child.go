package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"
)

// childInput is what the parent sends a child on stdin.
type childInput struct {
	Cell    Cell     `json:"cell"`
	Backend *Backend `json:"backend"`
	Dir     string   `json:"dir"` // where local backends make their directories
	Rep     int      `json:"rep"`
	Quick   bool     `json:"quick"`
}

// Result is what one repetition of a cell measured.
type Result struct {
	Metrics map[string]float64 `json:"metrics"`
	// Samples keeps raw latencies (ms) for pooled percentiles.
	Samples map[string][]float64 `json:"samples,omitempty"`
	Info    map[string]string    `json:"info,omitempty"`
	Err     string               `json:"error,omitempty"`
	Wall    float64              `json:"wall_s"`

	q bool // the run is -quick
}

func (r *Result) quick() bool { return r.q }

func newResult() *Result {
	return &Result{Metrics: map[string]float64{}, Samples: map[string][]float64{}, Info: map[string]string{}}
}

// childMain runs one cell repetition: the input on stdin, the Result as JSON
// on stdout, progress on stderr.
func childMain() int {
	var in childInput
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad input:", err)
		return 2
	}
	if in.Cell.Kind != "peer" {
		// A peer cell profiles its clock's span alone (runPeerCell): the
		// input it makes first would be most of a whole-child profile.
		defer startCPUProfile(in)()
	}
	if path := os.Getenv("REDOKIT_BENCH_MEMPROFILE"); path != "" {
		// Every allocation of the child, written at its end: what it
		// allocated is what it touched fresh (page faults, zeroing).
		runtime.MemProfileRate = 4096
		defer func() {
			if f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, strings.ReplaceAll(in.Cell.ID, "/", "_"), in.Rep)); err == nil {
				runtime.GC() // the profile shows allocations as of the last collection
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout(in))
	defer cancel()
	start := time.Now()
	res := newResult()
	res.q = in.Quick
	var err error
	switch in.Cell.Kind {
	case "writer":
		err = runWriterCell(ctx, in, res)
	case "read":
		err = runReadCell(ctx, in, res)
	case "peer":
		err = runPeerCell(ctx, in, res)
	case "pipeline":
		err = runPipelineCell(ctx, in, res)
	case "apply":
		err = runApplyCell(ctx, in, res)
	default:
		err = fmt.Errorf("unknown cell kind %q", in.Cell.Kind)
	}
	if err != nil {
		res.Err = err.Error()
	}
	res.Wall = time.Since(start).Seconds()
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	pprof.StopCPUProfile()
	return 0
}

func childTimeout(in childInput) time.Duration {
	if in.Cell.Kind == "apply" {
		// The gen log is written first, then replayed twice, the naive
		// replay with a durable commit per row on MariaDB.
		if in.Quick {
			return 5 * time.Minute
		}
		return 30 * time.Minute
	}
	if in.Quick {
		return 90 * time.Second
	}
	return 10 * time.Minute
}

// runChild runs one cell repetition in a child process of this binary.
func runChild(ctx context.Context, in childInput, stderr io.Writer) *Result {
	exe, err := os.Executable()
	if err != nil {
		return &Result{Err: err.Error()}
	}
	body, _ := json.Marshal(in)
	ctx, cancel := context.WithTimeout(ctx, childTimeout(in)+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-child")
	cmd.Stdin = bytes.NewReader(body)
	if in.Cell.Procs > 0 {
		cmd.Env = append(os.Environ(), fmt.Sprintf("GOMAXPROCS=%d", in.Cell.Procs))
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = stderr
	start := time.Now()
	runErr := cmd.Run()
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		msg := fmt.Sprintf("child failed (%v) and wrote no result", runErr)
		return &Result{Err: msg, Wall: time.Since(start).Seconds()}
	}
	if res.Err == "" && runErr != nil {
		res.Err = runErr.Error()
	}
	return &res
}

// startCPUProfile starts a CPU profile of the child when
// REDOKIT_BENCH_CPUPROFILE names a path prefix, for looking into a cell (not
// used by the report), and returns what stops it.
func startCPUProfile(in childInput) (stop func()) {
	path := os.Getenv("REDOKIT_BENCH_CPUPROFILE")
	if tp := os.Getenv("REDOKIT_BENCH_TRACE"); tp != "" {
		f, err := os.Create(fmt.Sprintf("%s.%s.%d", tp, strings.ReplaceAll(in.Cell.ID, "/", "_"), in.Rep))
		if err == nil && trace.Start(f) == nil {
			return func() { trace.Stop(); f.Close() }
		}
	}
	if path == "" {
		return func() {}
	}
	f, err := os.Create(fmt.Sprintf("%s.%s.%d", path, strings.ReplaceAll(in.Cell.ID, "/", "_"), in.Rep))
	if err != nil {
		return func() {}
	}
	if pprof.StartCPUProfile(f) != nil {
		f.Close()
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
