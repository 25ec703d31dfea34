package gwbench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
)

// protocolVersion is the MCP revision the client asks for in initialize.
const protocolVersion = "2025-06-18"

// rpcMessage is the part of an incoming JSON-RPC message the client reads.
type rpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Result *rpcResult      `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// rpcResult holds the fields of the initialize and tools/call results the
// client reads; the decoder skips the rest.
type rpcResult struct {
	ProtocolVersion string `json:"protocolVersion"`
	Content         []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// isResponse reports whether m answers a request (it has an id and no method).
func (m *rpcMessage) isResponse() bool {
	return len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")) && m.Method == ""
}

// text returns the text of the first content item of a tools/call result.
func (m *rpcMessage) text() string {
	if m.Result == nil || len(m.Result.Content) == 0 {
		return ""
	}
	return m.Result.Content[0].Text
}

// decodeMessages decodes one JSON-RPC message or a batch of them.
func decodeMessages(data []byte) ([]*rpcMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var batch []*rpcMessage
		if err := json.Unmarshal(data, &batch); err != nil {
			return nil, fmt.Errorf("decoding JSON-RPC batch: %w", err)
		}
		return batch, nil
	}
	var m rpcMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding JSON-RPC message: %w", err)
	}
	return []*rpcMessage{&m}, nil
}

// Request bodies. Messages are "s<n>-c<n>", so they need no JSON escaping.
func initializeRequest(id int64) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"gwbench","version":"1"}}}`, id, protocolVersion)
}

var initializedNotification = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

func echoRequest(id int64, message string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"%s"}}}`, id, message)
}

// echoMessage is the message session s sends in its request with id id.
func echoMessage(s int, id int64) string {
	return "s" + strconv.Itoa(s) + "-c" + strconv.FormatInt(id, 10)
}

// errMisrouted settles a call whose first reply was meant for another call.
var errMisrouted = errors.New("reply meant for another call")

// A reply settles one pending call.
type reply struct {
	msg *rpcMessage
	err error // errMisrouted, or nil
}

// A pendingCall waits for the reply to one request.
type pendingCall struct {
	want string     // the expected text; "" accepts any result (initialize)
	done chan reply // buffered: deliver never blocks
}

// mux numbers one session's requests and routes its replies by id. Its
// methods are safe for concurrent use: the direct target shares one mux
// between all its workers, and the SSE reader delivers while callers wait.
type mux struct {
	mu      sync.Mutex
	lastID  int64
	pending map[int64]*pendingCall
	// late holds the expected texts of calls settled by a reply that was not
	// theirs (or abandoned): their own reply, if it comes, is ignored.
	late      map[int64]string
	misrouted atomic.Int64
	err       error // set by failAll: the connection is gone
}

func newMux() *mux {
	return &mux{pending: make(map[int64]*pendingCall), late: make(map[int64]string)}
}

// begin registers the next request, a call from session s when want is
// true, and returns its id, its message (for a call) and its waiter.
func (m *mux) begin(s int, call bool) (int64, string, *pendingCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastID++
	id := m.lastID
	p := &pendingCall{done: make(chan reply, 1)}
	var msg string
	if call {
		msg = echoMessage(s, id)
		p.want = "Echo: " + msg
	}
	if m.err != nil {
		p.done <- reply{err: m.err}
		return id, msg, p
	}
	m.pending[id] = p
	return id, msg, p
}

// abandon forgets a request that will not be waited for any more.
func (m *mux) abandon(id int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pending[id]; ok {
		delete(m.pending, id)
		if p.want != "" {
			m.late[id] = p.want
		}
	}
}

// deliver routes one incoming message. Requests and notifications from the
// server are ignored; a response settles the call with its id, and counts as
// misrouted when it is not that call's reply or no call has that id.
func (m *mux) deliver(msg *rpcMessage) {
	if !msg.isResponse() {
		return
	}
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil { // not one of our numeric ids
		m.misrouted.Add(1)
		return
	}
	p, ok := m.pending[id]
	if !ok {
		if want, ok := m.late[id]; ok && msg.Error == nil && msg.text() == want {
			delete(m.late, id) // the right reply, after a wrong one settled the call
			return
		}
		m.misrouted.Add(1)
		return
	}
	delete(m.pending, id)
	if p.want != "" && msg.Error == nil && msg.text() != p.want {
		m.misrouted.Add(1)
		m.late[id] = p.want
		p.done <- reply{msg: msg, err: errMisrouted}
		return
	}
	p.done <- reply{msg: msg}
}

// failAll settles every pending call, and every later one, with err: the
// connection is gone.
func (m *mux) failAll(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
	for id, p := range m.pending {
		delete(m.pending, id)
		p.done <- reply{err: err}
	}
}

// settled converts a reply into the call's outcome: nil, errMisrouted, a
// JSON-RPC error, or a tool error.
func settled(r reply) error {
	switch {
	case r.err != nil:
		return r.err
	case r.msg.Error != nil:
		return r.msg.Error
	case r.msg.Result == nil:
		return errors.New("response without result")
	case r.msg.Result.IsError:
		return fmt.Errorf("tool error: %s", r.msg.text())
	}
	return nil
}
