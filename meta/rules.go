package meta

import (
	"fmt"

	"github.com/redokit/redokit/segment"
)

// The body rules of docs/FORMAT.md ("Writer state", "Meta object") that the
// strict decoding of the envelope does not already keep. decodeStrict and
// encoding/json keep the forms: every field present once, numbers as JSON
// integers without sign, fraction or exponent within their type's range, a
// `spans` key a decimal uint64, `updated` RFC 3339 text; decodeMeta and
// decodeWriterState keep the token's form (32 lowercase hex digits), the
// epoch, seq, fence and span order, and the checkpoint below the resolved ts.

// checkMetaRules checks the rules of docs/FORMAT.md that a decoded meta
// object's body keeps beyond its field types; key names the object in
// errors, which match ErrCorrupt.
//
//   - every key of `writers` is a writer ID (segment.ValidateID). Its value
//     is not checked: it is the epoch of the writer's state at the last
//     tick, or 0 for a writer added (AddWriter) that no tick has seen a
//     state of yet;
//   - every barrier's `id` is a non-empty string, and no two barriers have
//     the same one (AddBarrier replaces a barrier of the same ID);
//   - every barrier holds `resolved_ts ≤ commit_ts`: AddBarrier refuses a
//     barrier below the resolved ts, and the coordinator's watermark never
//     passes a pending barrier's commit ts (computeResolved takes the
//     minimum over them, and the previous resolved ts was already at or
//     below each), so an object that breaks it was not written so by a
//     coordinator.
func checkMetaRules(key string, m *Meta) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("meta: %s: %s: %w", key, fmt.Sprintf(format, args...), ErrCorrupt)
	}
	for id := range m.Writers {
		if err := segment.ValidateID(id); err != nil {
			return bad("writers: key %q is not a writer ID: %v", id, err)
		}
	}
	seen := make(map[string]bool, len(m.Barriers))
	for i, b := range m.Barriers {
		switch {
		case b.ID == "":
			return bad("barriers[%d]: empty id", i)
		case seen[b.ID]:
			return bad("barriers[%d]: id %q appears twice", i, b.ID)
		case b.CommitTs < m.ResolvedTs:
			return bad("barriers[%d] (id %q): commit ts %d is below resolved ts %d, which a pending barrier holds at or below its commit ts", i, b.ID, b.CommitTs, m.ResolvedTs)
		}
		seen[b.ID] = true
	}
	return nil
}

// checkStateRules is checkMetaRules for a writer state object. Every rule
// the document states for a writer state's body beyond the field types is
// kept by decodeWriterState (token, epoch ≥ 1, seq 0 without has_seq, fence
// and span order) and readWriterState (log and writer match the key), so
// there is nothing left to check here; the hook stays for rules to come.
func checkStateRules(key string, st *WriterState) error {
	return nil
}
