// Package layout is the one place that knows where a log's objects lie in its
// bucket. Every other package asks it for keys; none builds one by hand, so
// the layout can be read, and changed, in one file.
//
// A log with ID L owns every key under "L/":
//
//	L/meta                         the meta object (global resolved ts, checkpoint, spans, barriers)
//	L/writers/W                    writer W's state (epoch, lease, progress, fences)
//	L/seg/W/<segment name>         writer W's segments (grammar in package segment)
//	L/~deleting                    present only while the whole log is being removed
//
// IDs (log, writer) are validated by segment.ValidateID before they reach
// here: they hold no "/", so one log's keys never lie under another's.
package layout

const (
	// SegmentDir is the key element between a log ID and a writer ID.
	SegmentDir = "seg"
	// WritersDir is the key element under a log that holds one state object
	// per writer.
	WritersDir = "writers"
	// metaName is the meta object's key element under its log.
	metaName = "meta"
	// deleteMarkerName is the key element of the marker that says a removal
	// of the whole log is under way.
	deleteMarkerName = "~deleting"
)

// Log is the prefix of every key of a log.
func Log(logID string) string { return logID + "/" }

// Segments is the prefix of every segment of a log.
func Segments(logID string) string { return logID + "/" + SegmentDir + "/" }

// WriterSegments is the prefix of every segment of one writer of a log.
func WriterSegments(logID, writerID string) string { return Segments(logID) + writerID + "/" }

// Meta is the key of a log's meta object.
func Meta(logID string) string { return logID + "/" + metaName }

// Writers is the prefix of every writer state of a log.
func Writers(logID string) string { return logID + "/" + WritersDir + "/" }

// WriterState is the key of one writer's state object.
func WriterState(logID, writerID string) string { return Writers(logID) + writerID }

// DeleteMarker is the key of the marker written before a whole log is
// removed, so that an interrupted removal is finished before the ID is used
// again. It sorts after every other key of the log ("~" is above every
// character an ID or element uses), so a listing reaches it last.
func DeleteMarker(logID string) string { return logID + "/" + deleteMarkerName }
