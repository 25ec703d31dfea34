package stdioproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// errLineTooLong reports a line on stdin longer than the limit; the line is
// skipped and reading goes on with the next one.
var errLineTooLong = fmt.Errorf("a message on stdin exceeds %d bytes", maxMessageBytes)

// lineReader splits newline-delimited JSON (the MCP stdio transport) into
// lines, without holding more than max bytes of one line.
type lineReader struct {
	r   *bufio.Reader
	max int
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its end, errLineTooLong for a line
// over the limit (skipped), or the reader's error (io.EOF at the end). A
// last line without a newline is a line.
func (lr *lineReader) next() ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) > lr.max+2 { // +2: the line's end, \r\n
			tooLong, line = true, nil
		}
		if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		switch {
		case tooLong:
			return nil, errLineTooLong // a read error, if any, comes next time
		case err != nil && (err != io.EOF || len(line) == 0):
			return nil, err
		}
		return line, nil
	}
}
