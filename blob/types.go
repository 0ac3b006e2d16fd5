package blob

import "github.com/redokit/redokit/blob/driver"

// These types cross the Bucket unchanged in both directions: a caller's
// PutOptions and ListOptions reach the driver, and the driver's Attrs,
// ListPage and AppendFile reach the caller with only keys made relative. They
// are aliases of the driver package's types rather than copies so that the
// Bucket converts nothing, and so that a driver author and a caller read one
// definition of what each field means.
type (
	PutOptions  = driver.PutOptions
	Attrs       = driver.Attrs
	ListOptions = driver.ListOptions
	ListPage    = driver.ListPage
	AppendFile  = driver.AppendFile

	WritebackStarter = driver.WritebackStarter
)

// MaxDeleteBatch is the largest number of keys Bucket passes to one driver
// Delete call (S3's DeleteObjects limit): request budgets count in it.
const MaxDeleteBatch = driver.MaxDeleteBatch

// DefaultPageSize is the page size of List, and the largest ListPage asks a
// driver for.
const DefaultPageSize = driver.DefaultPageSize
