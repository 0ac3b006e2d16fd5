package main

import (
	"fmt"
	"strings"
)

// Cell is one configuration of the matrix. Each repetition of a cell runs
// in a child process of its own, so that its peak RSS is its own.
type Cell struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // writer | read | peer | pipeline | apply
	// Backend names a Backend (kinds writer and pipeline); peers run on
	// local-fsync, apply and read on local-nosync.
	Backend     string  `json:"backend"`
	RowSize     int     `json:"row_size"`
	FlushMS     int     `json:"flush_ms,omitempty"`
	Compression string  `json:"compression,omitempty"` // lz4 | none
	Writers     int     `json:"writers,omitempty"`
	Mix         string  `json:"mix,omitempty"` // rows | ddl
	SegmentMiB  int     `json:"segment_mib,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"` // length of the write phase
	// LatencySeconds is the length of the latency phase (at least 2.5
	// flush intervals); 0 means Seconds.
	LatencySeconds float64 `json:"latency_seconds,omitempty"`
	// QuotaMiB is the writers' memory quota; 0 means the writer's default.
	QuotaMiB int `json:"quota_mib,omitempty"`
	// Peers: the log, its workload (W1, W2, W1-long; "" in the main
	// matrix), how many records, a sync every SyncEvery records or, with
	// SyncBytes, every SyncBytes of payload; Cols, the columns of a row (1,
	// or 10 for the comparison with the model of TiCDC's writer); Procs, the
	// child's GOMAXPROCS (0: inherited).
	Peer      string `json:"peer,omitempty"`
	Workload  string `json:"workload,omitempty"`
	Records   int    `json:"records,omitempty"`
	SyncEvery int    `json:"sync_every,omitempty"`
	SyncBytes int64  `json:"sync_bytes,omitempty"`
	Cols      int    `json:"cols,omitempty"`
	Procs     int    `json:"gomaxprocs,omitempty"`
	// Pipeline: the redo gate on or off; Rate rows/s in the latency phase.
	Gate string `json:"gate,omitempty"`
	Rate int    `json:"rate,omitempty"`
	// Apply: the sink (sqlite, mariadb, postgres), the row changes of the
	// gen workload (Mix "insert": the workload whose inserts alone make the
	// log, against the sink's bulk load; "": the whole mixed log, against
	// the naive replay; "rare-ddl": the same with DDLs at a CDC stream's
	// rate), and the row changes of the naive replay (a prefix
	// of the log when fewer). Sync is SQLite's synchronous pragma ("" is
	// the sink's NORMAL; "full" makes each commit durable).
	Sink      string `json:"sink,omitempty"`
	Rows      int    `json:"rows,omitempty"`
	NaiveRows int    `json:"naive_rows,omitempty"`
	Sync      string `json:"sync,omitempty"`
	// Read: MiB of payload each of the Writers writes into the log read.
	LogMiB int `json:"log_mib,omitempty"`
	// Roles of the cell in the report's targets.
	Roles []string `json:"roles,omitempty"`
}

func writerCell(be string, rowSize, flushMS int, comp string, writers int, mix string, seg int, secs float64, roles ...string) Cell {
	c := Cell{Kind: "writer", Backend: be, RowSize: rowSize, FlushMS: flushMS, Compression: comp,
		Writers: writers, Mix: mix, SegmentMiB: seg, Seconds: secs, Roles: roles}
	c.ID = fmt.Sprintf("writer/%s/row%d/flush%dms/%s/w%d/%s", be, rowSize, flushMS, comp, writers, mix)
	if seg > 0 {
		c.ID += fmt.Sprintf("/seg%dMiB", seg)
	}
	return c
}

// Role names of cells in the targets and charts.
const (
	rolePrimary  = "primary"    // the cell compared across backends: 512 B, 100 ms, lz4, 1 writer
	roleLZ4Off   = "lz4-off"    // local fsync, lz4 off: target ≥ 0.9× raw append
	roleLZ4On    = "lz4-on"     // local fsync, lz4 on: target ≥ 2× (raw append + 1-thread lz4)
	roleCloud16  = "cloud-16"   // object store, 16 MiB segments: target ≥ 0.9× raw PUT
	roleLatency1 = "latency-1s" // the 1 s flush interval beside the primary, for the latency chart
)

type matrixOpts struct {
	quick    bool
	backends []*Backend
	filter   string // substring of cell IDs to keep ("" keeps all)
}

// buildMatrix returns the cells of a run. -quick keeps a subset that answers
// every target and fills every chart; the full run is the factorial matrix on
// every available backend.
func buildMatrix(o matrixOpts) []Cell {
	var cells []Cell
	secs := 5.0
	if o.quick {
		secs = 1
	}
	// -quick shortens the latency phase and bounds the memory quota, so
	// the backlog a flat-out write phase leaves (and its final drain, which
	// counts in the throughput) stays short on slow emulators.
	tune := func(c Cell) Cell {
		if o.quick {
			c.LatencySeconds, c.QuotaMiB = 0.5, 64
		}
		return c
	}
	for _, be := range o.backends {
		if !be.Available {
			continue
		}
		isLocal := be.Kind == "local"
		isCloud := be.Name == "s3" || be.Name == "gcs" || be.Name == "azure" || be.Custom
		prim := writerCell(be.Name, 512, 100, "lz4", 1, "rows", 0, secs, rolePrimary)
		if be.Name == "local-fsync" {
			prim.Roles = append(prim.Roles, roleLZ4On)
		}
		cells = append(cells, prim)
		if o.quick {
			// The subset: what every target and chart needs.
			if be.Name == "local-fsync" {
				cells = append(cells,
					writerCell(be.Name, 512, 100, "none", 1, "rows", 0, secs, roleLZ4Off),
					writerCell(be.Name, 512, 1000, "lz4", 1, "rows", 0, secs, roleLatency1),
					writerCell(be.Name, 512, 100, "lz4", 1, "ddl", 0, secs))
			}
			if isCloud {
				cells = append(cells, writerCell(be.Name, 4096, 1000, "none", 1, "rows", 16, secs, roleCloud16, roleLatency1))
			}
			continue
		}
		for _, rs := range []int{128, 512, 4096} {
			for _, fl := range []int{100, 1000} {
				for _, comp := range []string{"lz4", "none"} {
					for _, w := range []int{1, 4} {
						if rs == 512 && fl == 100 && comp == "lz4" && w == 1 {
							continue // the primary, added above
						}
						var roles []string
						if isLocal && be.Name == "local-fsync" && rs == 512 && fl == 100 && comp == "none" && w == 1 {
							roles = append(roles, roleLZ4Off)
						}
						if rs == 512 && fl == 1000 && comp == "lz4" && w == 1 {
							roles = append(roles, roleLatency1)
						}
						cells = append(cells, writerCell(be.Name, rs, fl, comp, w, "rows", 0, secs, roles...))
					}
				}
			}
		}
		cells = append(cells, writerCell(be.Name, 512, 100, "lz4", 1, "ddl", 0, secs))
		if isCloud {
			cells = append(cells, writerCell(be.Name, 4096, 1000, "none", 1, "rows", 16, secs, roleCloud16))
		}
	}

	// Reader memory at two log sizes: 4 writers × 32 and 256 MiB in -quick,
	// × 256 MiB and 1 GiB otherwise.
	readSizes := []int{256, 1024}
	if o.quick {
		readSizes = []int{32, 256}
	}
	for _, n := range readSizes {
		cells = append(cells, readCell(4, n))
	}

	// WAL libraries on the same local workload.
	// (The full comparison, every workload at GOMAXPROCS 1 and 2, is
	// go run ./benchmarks -peers; see peercmp.go.)
	records := 400_000
	if o.quick {
		records = 60_000
	}
	for _, p := range peerNames {
		cells = append(cells, Cell{ID: "peer/" + p, Kind: "peer", Backend: "local-fsync", Peer: p,
			RowSize: peerRowSize, Records: records, SyncEvery: peerTxnRows, Cols: 1})
	}

	// The cost of consistency: the toy pipeline, gate off and on.
	psecs, rate := 4.0, 5000
	if o.quick {
		psecs = 0.5
	}
	for _, be := range o.backends {
		if !be.Available {
			continue
		}
		for _, g := range []string{"off", "on"} {
			cells = append(cells, Cell{ID: fmt.Sprintf("pipeline/%s/gate-%s", be.Name, g), Kind: "pipeline",
				Backend: be.Name, Gate: g, RowSize: 512, FlushMS: 100, Compression: "lz4", Seconds: psecs, Rate: rate})
		}
	}

	// `redokit apply` against a naive replay of the same gen log, into
	// SQLite (its default synchronous=NORMAL, and FULL), MariaDB and
	// PostgreSQL (durable commits), with gen's DDLs and with DDLs at a CDC
	// stream's rate (rare-ddl); and of the gen workload's inserts alone
	// against each database's bulk load of the same rows. The naive replay
	// runs on a prefix of the log: per-row durable commits would take hours
	// over the whole of it.
	rows, naiveLite, naiveDurable := 1_000_000, 100_000, 20_000
	if o.quick {
		rows, naiveLite, naiveDurable = 100_000, 20_000, 5_000
	}
	for _, c := range []Cell{
		{ID: "apply/sqlite", Sink: applySQLite, NaiveRows: naiveLite},
		{ID: "apply/sqlite-full", Sink: applySQLite, Sync: "full", NaiveRows: naiveDurable},
		{ID: "apply/mariadb", Sink: applyMariaDB, NaiveRows: naiveDurable},
		{ID: "apply/postgres", Sink: applyPostgres, NaiveRows: naiveDurable},
		{ID: "apply/rare-ddl/sqlite-full", Sink: applySQLite, Sync: "full", Mix: applyRareDDL, NaiveRows: naiveDurable},
		{ID: "apply/rare-ddl/mariadb", Sink: applyMariaDB, Mix: applyRareDDL, NaiveRows: naiveDurable},
		{ID: "apply/rare-ddl/postgres", Sink: applyPostgres, Mix: applyRareDDL, NaiveRows: naiveDurable},
		{ID: "apply/insert/sqlite", Sink: applySQLite, Mix: applyInsert},
		{ID: "apply/insert/mariadb", Sink: applyMariaDB, Mix: applyInsert},
		{ID: "apply/insert/postgres", Sink: applyPostgres, Mix: applyInsert},
	} {
		c.Kind, c.Backend, c.RowSize, c.Rows = "apply", "local-nosync", 200, rows
		cells = append(cells, c)
	}

	for i := range cells {
		if cells[i].Kind == "writer" {
			cells[i] = tune(cells[i])
		}
	}
	if o.filter != "" {
		var kept []Cell
		for _, c := range cells {
			for _, f := range strings.Split(o.filter, ",") {
				if strings.Contains(c.ID, f) {
					kept = append(kept, c)
					break
				}
			}
		}
		cells = kept
	}
	return cells
}

func (c Cell) hasRole(r string) bool {
	for _, x := range c.Roles {
		if x == r {
			return true
		}
	}
	return false
}
