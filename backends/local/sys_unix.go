//go:build unix

package local

import "golang.org/x/sys/unix"

// linkNoReplace is the portable no-replace rename: link(2) never replaces
// an existing name (EEXIST), then the old name is removed. Between the two
// calls the file has both names; a crash there leaves the old name behind,
// which for a Put is a temporary file the next sweep removes.
func linkNoReplace(oldDir int, oldName string, newDir int, newName string) error {
	if err := ignoringEINTR(func() error { return unix.Linkat(oldDir, oldName, newDir, newName, 0) }); err != nil {
		return err
	}
	if err := ignoringEINTR(func() error { return unix.Unlinkat(oldDir, oldName, 0) }); err != nil {
		return &unlinkError{err}
	}
	return nil
}

// unlinkError reports that linkNoReplace made the new name but could not
// remove the old one: the rename took effect, only a second name remains.
type unlinkError struct{ err error }

func (e *unlinkError) Error() string {
	return "linked, but removing the old name failed: " + e.err.Error()
}
func (e *unlinkError) Unwrap() error { return e.err }
