package nativemsg

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func header(n uint32) []byte { return binary.NativeEndian.AppendUint32(nil, n) }

// jsonOfSize returns a valid JSON message of exactly n bytes (n >= 2).
func jsonOfSize(n int) []byte {
	if n < 2 {
		return bytes.Repeat([]byte("1"), n)
	}
	return []byte(`"` + strings.Repeat("x", n-2) + `"`)
}

func TestWriteReadToBrowser(t *testing.T) {
	for _, tc := range []struct {
		name       string
		size       int
		wantFrames int
		wantErr    error
	}{
		{name: "empty is refused", size: 0, wantErr: ErrEmptyFrame},
		{name: "one byte", size: 1, wantFrames: 1},
		{name: "exactly 1 MiB in one frame", size: MaxToBrowser, wantFrames: 1},
		{name: "1 MiB + 1 is chunked", size: MaxToBrowser + 1, wantFrames: 3},
		{name: "5 MiB is chunked", size: 5 << 20, wantFrames: 10},
		{name: "over the link limit is refused", size: MaxLink + 1, wantErr: &FrameTooLargeError{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := jsonOfSize(tc.size)
			var out bytes.Buffer
			err := NewBrowserWriter(&out, "t").WriteMessage(msg)
			if tc.wantErr != nil {
				var tooLarge *FrameTooLargeError
				if !errors.Is(err, tc.wantErr) && !(errors.As(tc.wantErr, &tooLarge) && errors.As(err, &tooLarge)) {
					t.Fatalf("WriteMessage error = %v, want %v", err, tc.wantErr)
				}
				if out.Len() != 0 {
					t.Fatalf("wrote %d bytes despite the error", out.Len())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var r Reassembler
			frames := 0
			var got []byte
			for {
				f, err := ReadFrame(&out, MaxToBrowser) // what Chrome would accept
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("frame %d: %v", frames, err)
				}
				frames++
				whole, err := r.Add(f)
				switch {
				case errors.Is(err, ErrNotChunk):
					got = f
				case err != nil:
					t.Fatal(err)
				case whole != nil:
					got = whole
				}
			}
			if frames != tc.wantFrames {
				t.Fatalf("sent %d frames, want %d", frames, tc.wantFrames)
			}
			if !bytes.Equal(got, msg) {
				t.Fatalf("received %d bytes, want the %d sent", len(got), len(msg))
			}
			if r.Pending() != 0 {
				t.Fatalf("%d messages left half-assembled", r.Pending())
			}
		})
	}
}

func TestReadFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		input   []byte
		limit   int
		check   func(error) bool
		wantMsg string
	}{
		{"clean EOF", nil, MaxFromBrowser, func(e error) bool { return e == io.EOF }, "io.EOF"},
		{"truncated header", []byte{3, 0}, MaxFromBrowser, func(e error) bool { return e == io.ErrUnexpectedEOF }, "io.ErrUnexpectedEOF"},
		{"truncated body", append(header(10), `{"a"`...), MaxFromBrowser, func(e error) bool { return errors.Is(e, io.ErrUnexpectedEOF) }, "io.ErrUnexpectedEOF"},
		{"header only", header(10), MaxFromBrowser, func(e error) bool { return errors.Is(e, io.ErrUnexpectedEOF) }, "io.ErrUnexpectedEOF"},
		{"64 MiB + 1 refused", header(MaxFromBrowser + 1), MaxFromBrowser, func(e error) bool { var t *FrameTooLargeError; return errors.As(e, &t) }, "FrameTooLargeError"},
		{"4 GiB refused", header(^uint32(0)), MaxFromBrowser, func(e error) bool { var t *FrameTooLargeError; return errors.As(e, &t) }, "FrameTooLargeError"},
		{"zero length", header(0), MaxFromBrowser, func(e error) bool { return errors.Is(e, ErrEmptyFrame) }, "ErrEmptyFrame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tc.input), tc.limit)
			if !tc.check(err) {
				t.Fatalf("ReadFrame error = %v, want %s", err, tc.wantMsg)
			}
		})
	}
}

// An oversized length must be refused before the body is allocated: a
// hostile or corrupt header must not cost 4 GiB of memory.
func TestReadFrameRefusesBeforeAllocating(t *testing.T) {
	in := header(MaxFromBrowser + 1)
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = ReadFrame(bytes.NewReader(in), MaxFromBrowser)
	})
	if allocs > 3 {
		t.Fatalf("refusing an oversized frame made %.0f allocations; the body must not be allocated", allocs)
	}
}

func TestReassemblerRejectsBadChunks(t *testing.T) {
	frames := Chunk(jsonOfSize(3*ChunkData), "m")
	for _, tc := range []struct {
		name   string
		frames [][]byte
	}{
		{"starts mid-message", frames[1:2]},
		{"skips a chunk", [][]byte{frames[0], frames[2]}},
		{"bad base64", [][]byte{[]byte(`{"method":"native.chunk","params":{"id":"x","seq":0,"total":2,"data":"!!"}}`)}},
		{"total out of range", [][]byte{[]byte(`{"method":"native.chunk","params":{"id":"x","seq":0,"total":0,"data":""}}`)}},
		{"seq out of range", [][]byte{[]byte(`{"method":"native.chunk","params":{"id":"x","seq":5,"total":2,"data":""}}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Reassembler
			var err error
			for _, f := range tc.frames {
				if _, err = r.Add(f); err != nil {
					break
				}
			}
			if err == nil {
				t.Fatal("bad chunk sequence accepted")
			}
			if r.Pending() != 0 {
				t.Fatalf("%d half-built messages kept after an error", r.Pending())
			}
		})
	}
}

func TestChunkFramesAreJSONUnderLimit(t *testing.T) {
	for _, f := range Chunk(jsonOfSize(MaxToBrowser*3+7), "id\"with\\quotes") {
		if len(f) > MaxToBrowser {
			t.Fatalf("chunk frame of %d bytes", len(f))
		}
		if !json.Valid(f) {
			t.Fatalf("chunk frame is not JSON: %.80s", f)
		}
	}
}

// FuzzReadFrame feeds arbitrary bytes to the decoder: it must return a frame
// or an error, never panic, never return more than the limit.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0})
	f.Add(append(header(2), "{}"...))
	f.Add(append(header(2), "{"...))
	f.Add(header(0))
	f.Add(header(^uint32(0)))
	f.Add(append(append(header(2), "{}"...), append(header(4), "null"...)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for i := 0; i < 8; i++ {
			frame, err := ReadFrame(r, 1024)
			if err != nil {
				return
			}
			if len(frame) == 0 || len(frame) > 1024 {
				t.Fatalf("frame of %d bytes passed a 1024-byte limit", len(frame))
			}
		}
	})
}

// FuzzReassembler: arbitrary frames never panic the reassembler nor make it
// return a message over its limit.
func FuzzReassembler(f *testing.F) {
	for _, c := range Chunk(jsonOfSize(2*ChunkData+5), "a") {
		f.Add(c)
	}
	f.Add([]byte(`{"method":"native.chunk","params":{"id":"x","seq":0,"total":1,"data":"e30="}}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		r := Reassembler{Limit: 1 << 20}
		msg, err := r.Add(frame)
		if err == nil && len(msg) > 1<<20 {
			t.Fatalf("reassembled %d bytes over the limit", len(msg))
		}
	})
}
