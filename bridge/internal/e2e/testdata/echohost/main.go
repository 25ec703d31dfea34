// Command echohost is the smallest native-messaging host there is: it
// writes every frame it reads on stdin back to stdout unchanged. The
// end-to-end benchmark registers it as "com.browserbridge.echo" in the test
// profile so that the extension can time a raw native-messaging round trip
// in the same browser as the whole chain (dev_utils native_echo_benchmark).
//
// Frames are a uint32 length in native (little-endian) byte order followed
// by that many bytes of JSON. The program exits when Chrome closes stdin.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxFrame is the most the browser may send; echoing anything over 1 MiB
// back would close the port, so such a frame ends the program instead.
const maxFrame = 1 << 20

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "echohost:", err)
		os.Exit(1)
	}
}

func run(stdin io.Reader, stdout io.Writer) error {
	r := bufio.NewReaderSize(stdin, 64<<10)
	w := bufio.NewWriterSize(stdout, 64<<10)
	var head [4]byte
	buf := make([]byte, 0, 4096)
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return err
		}
		n := binary.LittleEndian.Uint32(head[:])
		if n == 0 || n > maxFrame {
			return fmt.Errorf("frame of %d bytes", n)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("reading a %d-byte frame: %w", n, io.ErrUnexpectedEOF)
		}
		if _, err := w.Write(head[:]); err != nil {
			return err
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}
