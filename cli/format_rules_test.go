package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/redokit/redokit/blob"
	"github.com/redokit/redokit/internal/layout"
)

// Decisions of docs/FORMAT.md where an independent decoder found the
// document and the CLI apart (issue 25): each test pins what the CLI does,
// which the document now says.

// TestFormatLogWithoutMetaObject: a log has a meta object. Without one,
// verify reports an error naming its key, and dump (a reader) refuses the
// log (docs/FORMAT.md, "The log's layout").
func TestFormatLogWithoutMetaObject(t *testing.T) {
	store := memName(t)
	genLog(t, store, "m", "--writers", "1")
	b, err := blob.Open(context.Background(), store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Delete(context.Background(), layout.Meta("m")); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "verify", "--storage", store, "--log", "m")
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "error", "m/meta", "the log has no meta object", "FAILED")
	r = cli(t, "dump", "--storage", store, "--log", "m")
	wantCode(t, r, 1)
	mustContain(t, "dump stderr", r.stderr, "m/meta", "does not exist")
}

// TestFormatBarrierBelowResolved: a pending barrier holds the global
// resolved ts at or below its commit ts, an invariant of the coordinator
// that readers check: a meta object (CRC intact) with a barrier below its
// resolved ts is corrupt, and verify reports it (docs/FORMAT.md, "Meta
// object").
func TestFormatBarrierBelowResolved(t *testing.T) {
	store := memName(t)
	genLog(t, store, "m", "--writers", "1")
	ctx := context.Background()
	b, err := blob.Open(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	key := layout.Meta("m")
	data, err := b.ReadAll(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Change the body's barriers only, and seal it again as the document
	// says: {"version":V,"crc32c":"<CRC-32C of body>","body":<body>}.
	head, body, ok := bytes.Cut(data, []byte(`,"crc32c":"`))
	if !ok {
		t.Fatalf("%s: no envelope: %s", key, data)
	}
	_, body, ok = bytes.Cut(body, []byte(`","body":`))
	if !ok {
		t.Fatalf("%s: no body: %s", key, data)
	}
	body = body[:len(body)-1]
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	var resolved uint64
	if err := json.Unmarshal(fields["resolved_ts"], &resolved); err != nil || resolved == 0 {
		t.Fatalf("resolved ts %s: %v", fields["resolved_ts"], err)
	}
	fields["barriers"] = json.RawMessage(fmt.Sprintf(`[{"id":"ddl-late","commit_ts":%d}]`, resolved-1))
	if body, err = json.Marshal(fields); err != nil {
		t.Fatal(err)
	}
	sum := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))
	sealed := fmt.Appendf(nil, `%s,"crc32c":"%08x","body":%s}`, head, sum, body)
	if _, err := b.Put(ctx, key, sealed, nil); err != nil {
		t.Fatal(err)
	}
	r := cli(t, "verify", "--storage", store, "--log", "m")
	wantCode(t, r, 1)
	mustContain(t, "verify", r.stdout, "m/meta", "ddl-late", fmt.Sprintf("below resolved ts %d", resolved), "FAILED")
}
