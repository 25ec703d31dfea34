package nativemsg

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ChunkMethod is the JSON-RPC notification that carries one piece of a
// message too large for a single frame to the browser:
//
//	{"jsonrpc":"2.0","method":"native.chunk","params":{"id":"c1","seq":0,"total":3,"data":"<base64>"}}
//
// The receiver concatenates the decoded data of seq 0..total-1 with the same
// id and handles the result as if it had arrived in one frame.
const ChunkMethod = "native.chunk"

// ChunkData is the number of message bytes per chunk. Base64 makes it
// 699,052 bytes, which with the envelope stays well under MaxToBrowser.
const ChunkData = 512 << 10

// MaxChunks bounds how many chunks one message may have: MaxLink / ChunkData.
const MaxChunks = MaxLink / ChunkData

// ChunkParams is the params object of a native.chunk notification.
type ChunkParams struct {
	ID    string `json:"id"`
	Seq   int    `json:"seq"`
	Total int    `json:"total"`
	Data  string `json:"data"`
}

// Chunk splits msg into native.chunk frames, each under MaxToBrowser. id
// must be unique among the messages in flight on one port.
func Chunk(msg []byte, id string) [][]byte {
	total := (len(msg) + ChunkData - 1) / ChunkData
	frames := make([][]byte, 0, total)
	prefix := `{"jsonrpc":"2.0","method":"` + ChunkMethod + `","params":{"id":` + strconv.Quote(id) +
		`,"total":` + strconv.Itoa(total) + `,"seq":`
	for seq := 0; seq < total; seq++ {
		part := msg[seq*ChunkData : min((seq+1)*ChunkData, len(msg))]
		f := make([]byte, 0, len(prefix)+24+base64.StdEncoding.EncodedLen(len(part)))
		f = append(f, prefix...)
		f = strconv.AppendInt(f, int64(seq), 10)
		f = append(f, `,"data":"`...)
		f = base64.StdEncoding.AppendEncode(f, part)
		f = append(f, `"}}`...)
		frames = append(frames, f)
	}
	return frames
}

// Reassembler rebuilds messages from native.chunk frames. It is the
// reference for the extension's implementation and is used by tests that
// stand in for the browser. It is not safe for concurrent use.
type Reassembler struct {
	// Limit bounds the size of one reassembled message; zero means MaxLink.
	Limit   int
	pending map[string]*partialMessage
}

type partialMessage struct {
	total int
	next  int
	buf   []byte
}

// ErrNotChunk is returned by Add for a frame that is not a native.chunk.
var ErrNotChunk = errors.New("nativemsg: not a chunk frame")

// Add takes one frame. For a chunk it returns the whole message once its
// last chunk arrives (nil before that). For any other frame it returns
// ErrNotChunk so the caller handles the frame itself.
func (r *Reassembler) Add(frame []byte) ([]byte, error) {
	var env struct {
		Method string       `json:"method"`
		Params *ChunkParams `json:"params"`
	}
	if err := json.Unmarshal(frame, &env); err != nil || env.Method != ChunkMethod {
		return nil, ErrNotChunk
	}
	p := env.Params
	if p == nil || p.ID == "" || p.Total < 1 || p.Total > MaxChunks || p.Seq < 0 || p.Seq >= p.Total {
		return nil, fmt.Errorf("nativemsg: malformed chunk envelope")
	}
	if r.pending == nil {
		r.pending = make(map[string]*partialMessage)
	}
	m := r.pending[p.ID]
	if m == nil {
		if p.Seq != 0 {
			return nil, fmt.Errorf("nativemsg: chunk %d of unknown message %q", p.Seq, p.ID)
		}
		m = &partialMessage{total: p.Total}
		r.pending[p.ID] = m
	}
	if p.Seq != m.next || p.Total != m.total {
		delete(r.pending, p.ID)
		return nil, fmt.Errorf("nativemsg: chunk %d/%d of %q out of order (want %d/%d)", p.Seq, p.Total, p.ID, m.next, m.total)
	}
	data, err := base64.StdEncoding.DecodeString(p.Data)
	if err != nil {
		delete(r.pending, p.ID)
		return nil, fmt.Errorf("nativemsg: chunk %d of %q: %w", p.Seq, p.ID, err)
	}
	limit := r.Limit
	if limit == 0 {
		limit = MaxLink
	}
	if len(m.buf)+len(data) > limit {
		delete(r.pending, p.ID)
		return nil, &FrameTooLargeError{Size: uint64(len(m.buf) + len(data)), Limit: limit}
	}
	m.buf = append(m.buf, data...)
	m.next++
	if m.next < m.total {
		return nil, nil
	}
	delete(r.pending, p.ID)
	return m.buf, nil
}

// Pending reports how many messages are partly reassembled.
func (r *Reassembler) Pending() int { return len(r.pending) }
