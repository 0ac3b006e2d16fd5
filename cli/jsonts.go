package cli

import (
	"encoding/json"
	"strconv"

	"github.com/redokit/redokit/meta"
)

// Every commit ts the CLI prints in JSON (--json, and dump's lines) is a
// JSON string of its decimal digits: "resolved_ts": "463000000000000777".
// A TSO is above 2^53, where a JSON number read as a double (jq 1.6, jq
// 1.7 once it computes with it, JavaScript) does not hold every integer:
// such a reader silently rounds it (to a multiple of 64 near today's TSOs),
// and a ts passed back from it (`redokit checkpoint set $(… | jq
// .resolved_ts)`) is off by some ticks, above or below. A string keeps
// every digit; `jq -r .resolved_ts` prints it bare, as every ts argument
// takes it. Counts, sizes, epochs and seqs stay numbers.
//
// The plain fields carry the ",string" option of encoding/json; the
// on-disk types that hold ts (meta.Fence, meta.Barrier, the spans map)
// have these CLI-side twins, so that the format of the meta object and the
// writer states never changes with the CLI's output.

// fenceJSON is a meta.Fence as the CLI prints it.
type fenceJSON struct {
	Epoch       uint64 `json:"epoch"`
	LastSeq     uint64 `json:"last_seq"`
	MaxTs       uint64 `json:"max_ts,string"`
	Digest      uint32 `json:"digest"`
	CommittedTs uint64 `json:"committed_ts,string"`
}

func newFenceJSON(f meta.Fence) fenceJSON {
	return fenceJSON{Epoch: f.Epoch, LastSeq: f.LastSeq, MaxTs: f.MaxTs, Digest: f.Digest, CommittedTs: f.CommittedTs}
}

func fencesJSON(fs []meta.Fence) []fenceJSON {
	if fs == nil {
		return nil
	}
	out := make([]fenceJSON, len(fs))
	for i, f := range fs {
		out[i] = newFenceJSON(f)
	}
	return out
}

// barrierJSON is a meta.Barrier as the CLI prints it.
type barrierJSON struct {
	ID       string `json:"id"`
	CommitTs uint64 `json:"commit_ts,string"`
}

func barriersJSON(bs []meta.Barrier) []barrierJSON {
	if bs == nil {
		return nil
	}
	out := make([]barrierJSON, len(bs))
	for i, b := range bs {
		out[i] = barrierJSON{ID: b.ID, CommitTs: b.CommitTs}
	}
	return out
}

// spanTs is the meta object's spans map (span ID → its effective flushed
// ts) as the CLI prints it: the ts as strings (the span IDs are object
// keys, strings already).
type spanTs map[meta.SpanID]uint64

func (m spanTs) MarshalJSON() ([]byte, error) {
	out := make(map[meta.SpanID]string, len(m))
	for span, ts := range m {
		out[span] = strconv.FormatUint(ts, 10)
	}
	return json.Marshal(out)
}

func (m *spanTs) UnmarshalJSON(b []byte) error {
	var in map[meta.SpanID]string
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*m = make(spanTs, len(in))
	for span, s := range in {
		ts, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		(*m)[span] = ts
	}
	return nil
}
