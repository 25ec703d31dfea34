//go:build !linux

package stdio

// family does nothing outside Linux: the child's process group (Windows:
// its process tree) is all that is stopped. docs/gateway.md says what
// escapes it on each system.
type family struct{}

func newFamilyMarker() (marker, env string)       { return "", "" }
func newFamily(leader int, marker string) *family { return nil }
func (f *family) terminate()                      {}
func (f *family) stop()                           {}
