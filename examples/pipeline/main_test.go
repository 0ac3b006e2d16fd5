package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestPipeline runs the whole pipeline, failover included, with every
// downstream write checked against the global resolved ts the log's meta
// object holds at that moment (and the gate's released ts): the downstream
// never holds a row the log does not cover, and ends equal to the upstream.
func TestPipeline(t *testing.T) {
	var out bytes.Buffer
	s, err := run(context.Background(), config{
		Dir: t.TempDir(), Captures: 2, Tables: 4, Txns: 1500, Rate: 3000, Seed: 7,
		FlushInterval: 10 * time.Millisecond, Tick: 5 * time.Millisecond,
		SegmentBytes: 16 << 10, Failover: true, Check: true,
	}, &out)
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err) // includes a downstream that differs from the upstream
	}
	if s.Violations != 0 {
		t.Fatalf("%d events reached the downstream above the log's global resolved ts; first: %s", s.Violations, s.FirstViolation)
	}
	if s.Checks == 0 || s.Released < int64(s.Rows+s.DDLs) {
		t.Fatalf("%d downstream writes checked, %d events released of %d: the check saw too little", s.Checks, s.Released, s.Rows+s.DDLs)
	}
	if !s.FailedOver || s.FailoverFrom <= startTs || s.Replayed == 0 {
		t.Fatalf("no real failover: %+v", s)
	}
	if s.ResolvedTs != startTs+uint64(s.Txns) || s.CheckpointTs != s.ResolvedTs {
		t.Fatalf("final resolved ts %d, checkpoint %d; want both %d", s.ResolvedTs, s.CheckpointTs, startTs+s.Txns)
	}
	if !strings.Contains(out.String(), "equal to the upstream") {
		t.Fatalf("the summary does not say the downstream matches:\n%s", out.String())
	}
}

// TestPipelineWithoutGate: the same check catches a sink that writes
// downstream as soon as it writes the redo log.
func TestPipelineWithoutGate(t *testing.T) {
	var out bytes.Buffer
	s, err := run(context.Background(), config{
		Dir: t.TempDir(), Captures: 2, Tables: 3, Txns: 100, Seed: 7, NoGate: true, Check: true,
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Violations == 0 {
		t.Fatalf("a sink without the gate wrote %d events downstream, none caught above the watermark:\n%s", s.Rows+s.DDLs, out.String())
	}
}
