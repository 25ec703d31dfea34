package nativemsg

import (
	"io"
	"strconv"
)

// BrowserWriter writes messages towards the browser: a message of up to
// MaxToBrowser bytes goes as one frame, a larger one (up to MaxLink) as
// native.chunk frames. It is not safe for concurrent use; each port has one
// writer.
type BrowserWriter struct {
	W      io.Writer
	prefix string
	next   uint64
}

// NewBrowserWriter returns a writer whose chunk ids start with prefix, which
// keeps them unique if two writers ever feed one port.
func NewBrowserWriter(w io.Writer, prefix string) *BrowserWriter {
	return &BrowserWriter{W: w, prefix: prefix}
}

// WriteMessage writes msg, chunked if it is over MaxToBrowser.
func (bw *BrowserWriter) WriteMessage(msg []byte) error {
	if len(msg) <= MaxToBrowser {
		return WriteFrame(bw.W, msg, MaxToBrowser)
	}
	if len(msg) > MaxLink {
		return &FrameTooLargeError{Size: uint64(len(msg)), Limit: MaxLink}
	}
	bw.next++
	for _, f := range Chunk(msg, bw.prefix+strconv.FormatUint(bw.next, 10)) {
		if err := WriteFrame(bw.W, f, MaxToBrowser); err != nil {
			return err
		}
	}
	return nil
}
