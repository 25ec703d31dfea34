// Package testbrowser stands in for Chrome and the extension in tests: it
// launches the real native host the way Chrome does (argv[1] = the
// extension's origin, frames on stdin/stdout, EOF on stdin to close the
// port) and plays the extension's part of docs/protocol.md. It exists
// because the process-level tests and benchmarks need a browser whose
// every frame they can see; the end-to-end suite uses real Chromium.
package testbrowser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// Message is one JSON-RPC message as the extension sees it.
type Message struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      json.RawMessage  `json:"id,omitempty"`
	Method  string           `json:"method,omitempty"`
	Params  json.RawMessage  `json:"params,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   *json.RawMessage `json:"error,omitempty"`
}

// Handler answers a request from the bridge: a result, or an error object.
type Handler func(method string, params json.RawMessage) (result any, errObj map[string]any)

// Browser is a running host process with the test as its browser.
type Browser struct {
	Cmd *exec.Cmd
	in  io.WriteCloser
	out io.ReadCloser
	inM sync.Mutex

	stdoutClosed atomic.Bool

	// States receives every host.state the host sends.
	States chan protocol.HostStateParams
	// MaxFrame is the largest frame the host wrote to stdout.
	MaxFrame atomic.Int64
	// Frames counts frames read from the host's stdout.
	Frames atomic.Int64

	handler Handler
	// direct: made by Attach, no host in between, so Hello attaches first.
	direct   bool
	attached atomic.Bool
	notify   atomic.Pointer[func(method string, params json.RawMessage)]
	nextID   atomic.Uint64
	mu       sync.Mutex
	pending  map[string]chan Message
	readErr  chan error
	exited   chan struct{}
	exitErr  error
}

// Options for Start.
type Options struct {
	HostBin string
	// Origin defaults to the bundled extension's origin.
	Origin string
	Env    []string
	// Handler answers the bridge's requests; nil echoes params as result.
	Handler Handler
	Stderr  io.Writer
}

// Start launches the host.
func Start(opts Options) (*Browser, error) {
	if opts.Origin == "" {
		opts.Origin = extension.Origin()
	}
	cmd := exec.Command(opts.HostBin, opts.Origin)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stderr = opts.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the host: %w", err)
	}
	b := newBrowser(in, out, opts.Handler)
	b.Cmd = cmd
	go b.read(bufio.NewReaderSize(out, 1<<20))
	return b, nil
}

// Attach plays the extension directly on a connection to the bridge's
// socket, with no host in between: the baseline the host is measured
// against. Hello attaches first, as a host would (the bridge accepts hello
// only behind host.attach); the caller sends hello.
func Attach(conn net.Conn, h Handler) *Browser {
	b := newBrowser(conn, conn, h)
	b.direct = true
	go b.read(bufio.NewReaderSize(conn, 1<<20))
	return b
}

// AttachHost sends host.attach as the bundled extension's host would; Hello
// calls it for a Browser made by Attach.
func (b *Browser) AttachHost(ctx context.Context) error {
	m, err := b.Call(ctx, protocol.HostAttach, protocol.HostAttachParams{
		Protocol: protocol.Version, HostVersion: "test", PID: os.Getpid(), Origin: extension.Origin(),
	})
	if err != nil {
		return err
	}
	if m.Error != nil {
		return fmt.Errorf("host.attach: %s", *m.Error)
	}
	return nil
}

func newBrowser(in io.WriteCloser, out io.ReadCloser, h Handler) *Browser {
	b := &Browser{
		in: in, out: out,
		States:  make(chan protocol.HostStateParams, 64),
		handler: h,
		pending: make(map[string]chan Message),
		readErr: make(chan error, 1),
		exited:  make(chan struct{}),
	}
	if b.handler == nil {
		b.handler = func(_ string, p json.RawMessage) (any, map[string]any) { return p, nil }
	}
	return b
}

// read parses the host's stdout strictly: anything that is not a frame of
// JSON is a test failure reported by Err.
func (b *Browser) read(r io.Reader) {
	var ra nativemsg.Reassembler
	defer func() {
		if b.Cmd != nil {
			b.exitErr = b.Cmd.Wait()
		}
		close(b.exited)
	}()
	for {
		frame, err := nativemsg.ReadFrame(r, nativemsg.MaxLink)
		if err != nil {
			if err != io.EOF && !b.stdoutClosed.Load() {
				b.readErr <- fmt.Errorf("host stdout: %w", err)
			}
			b.failPending()
			return
		}
		b.Frames.Add(1)
		if int64(len(frame)) > b.MaxFrame.Load() {
			b.MaxFrame.Store(int64(len(frame)))
		}
		m, err := decodeMessage(frame)
		if err != nil {
			b.readErr <- fmt.Errorf("host wrote a frame that is not JSON: %.100q", frame)
			return
		}
		if m.Method == nativemsg.ChunkMethod {
			// Only a chunk goes to the reassembler, which decodes every
			// frame it is given once more to tell.
			msg, err := ra.Add(frame)
			switch {
			case errors.Is(err, nativemsg.ErrNotChunk):
				// A frame with the method but not the envelope: a message.
			case err != nil:
				b.readErr <- err
				return
			case msg == nil:
				continue // more chunks to come
			default:
				if m, err = decodeMessage(msg); err != nil {
					b.readErr <- fmt.Errorf("host wrote a frame that is not JSON: %.100q", msg)
					return
				}
			}
		}
		b.dispatch(m)
	}
}

func (b *Browser) dispatch(m Message) {
	switch {
	case m.Method == protocol.HostState:
		var st protocol.HostStateParams
		_ = json.Unmarshal(m.Params, &st)
		if st.State != protocol.StateConnected {
			// What the extension does: the host cannot deliver replies to
			// requests made before the bridge went away.
			b.failPending()
		}
		select {
		case b.States <- st:
		default:
		}
	case m.Method != "" && m.ID == nil:
		if f := b.notify.Load(); f != nil {
			(*f)(m.Method, m.Params)
		}
	case m.Method != "" && m.ID != nil:
		go func() {
			res, errObj := b.handler(m.Method, m.Params)
			if raw, ok := res.(json.RawMessage); ok && errObj == nil {
				if frame, ok := resultFrame(m.ID, raw); ok {
					_ = b.SendRaw(frame)
					return
				}
			}
			reply := map[string]any{"jsonrpc": "2.0", "id": m.ID}
			if errObj != nil {
				reply["error"] = errObj
			} else {
				reply["result"] = res
			}
			_ = b.Send(reply)
		}()
	case m.Method == "":
		var id string
		_ = json.Unmarshal(m.ID, &id)
		b.mu.Lock()
		ch := b.pending[id]
		delete(b.pending, id)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// resultFrame is the reply with id and result raw, written by appending:
// the benchmarks' extension answers most calls this way, and encoding a
// map per reply would count in their figures as no browser's work does.
// ok is false if raw is not JSON (encoding the reply then fails as it
// did). The reply's keys are in another order than a map's; its meaning
// is the same.
func resultFrame(id, raw json.RawMessage) (frame []byte, ok bool) {
	if len(raw) == 0 {
		raw = json.RawMessage("null") // what json.Marshal writes for a nil RawMessage
	} else if !json.Valid(raw) {
		return nil, false
	}
	frame = make([]byte, 0, len(id)+len(raw)+32)
	frame = append(frame, `{"jsonrpc":"2.0","id":`...)
	frame = append(frame, id...)
	frame = append(frame, `,"result":`...)
	frame = append(frame, raw...)
	return append(frame, '}'), true
}

func (b *Browser) failPending() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, ch := range b.pending {
		close(ch)
		delete(b.pending, id)
	}
}

// Send writes one message to the host's stdin.
func (b *Browser) Send(v any) error {
	msg, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.SendRaw(msg)
}

// SendRaw writes one frame to the host's stdin.
func (b *Browser) SendRaw(frame []byte) error {
	b.inM.Lock()
	defer b.inM.Unlock()
	return nativemsg.WriteFrame(b.in, frame, nativemsg.MaxFromBrowser)
}

// ErrLinkLost is returned by Call when the host said the bridge went away
// before the reply came.
var ErrLinkLost = errors.New("the host lost the bridge before the reply")

// Call sends a request to the bridge and waits for the reply.
func (b *Browser) Call(ctx context.Context, method string, params any) (Message, error) {
	id := protocol.IDPrefixExt + strconv.FormatUint(b.nextID.Add(1), 10)
	ch := make(chan Message, 1)
	b.mu.Lock()
	b.pending[id] = ch
	b.mu.Unlock()
	if err := b.Send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		return Message{}, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return Message{}, ErrLinkLost
		}
		return m, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Hello registers this browser with the bridge under instanceID.
func (b *Browser) Hello(ctx context.Context, instanceID string) (protocol.HelloResult, error) {
	if b.direct && b.attached.CompareAndSwap(false, true) {
		if err := b.AttachHost(ctx); err != nil {
			return protocol.HelloResult{}, err
		}
	}
	p := protocol.HelloParams{InstanceID: instanceID, Profile: "Test"}
	p.Browser.Name, p.Browser.Version = "TestBrowser", "1.0"
	p.Extension.ID, p.Extension.Version = "test", "0.0.1"
	m, err := b.Call(ctx, protocol.Hello, p)
	if err != nil {
		return protocol.HelloResult{}, err
	}
	if m.Error != nil {
		return protocol.HelloResult{}, fmt.Errorf("hello: %s", *m.Error)
	}
	var r protocol.HelloResult
	return r, json.Unmarshal(m.Result, &r)
}

// WaitState waits for a host.state with the given state.
func (b *Browser) WaitState(ctx context.Context, state string) (protocol.HostStateParams, error) {
	for {
		select {
		case st := <-b.States:
			if st.State == state {
				return st, nil
			}
		case err := <-b.readErr:
			return protocol.HostStateParams{}, err
		case <-b.exited:
			return protocol.HostStateParams{}, fmt.Errorf("host exited (%v) while waiting for state %q", b.exitErr, state)
		case <-ctx.Done():
			return protocol.HostStateParams{}, fmt.Errorf("waiting for host state %q: %w", state, ctx.Err())
		}
	}
}

// OnNotify sets the function told about every notification from the
// bridge other than host.state.
func (b *Browser) OnNotify(f func(method string, params json.RawMessage)) { b.notify.Store(&f) }

// CloseStdout closes the read end of the host's stdout, as when the browser
// dies without closing stdin: the host's next write fails with EPIPE.
func (b *Browser) CloseStdout() error {
	b.stdoutClosed.Store(true)
	return b.out.Close()
}

// CloseStdin closes the port the way Chrome does.
func (b *Browser) CloseStdin() error { return b.in.Close() }

// Exited is closed when the host process has exited.
func (b *Browser) Exited() <-chan struct{} { return b.exited }

// ExitErr is the host's exit status, valid after Exited is closed.
func (b *Browser) ExitErr() error { return b.exitErr }

// Err returns a protocol violation seen on the host's stdout, if any.
func (b *Browser) Err() error {
	select {
	case err := <-b.readErr:
		return err
	default:
		return nil
	}
}

// Stop closes stdin and waits for the host to exit, killing it after timeout.
func (b *Browser) Stop(timeout time.Duration) error {
	_ = b.in.Close()
	select {
	case <-b.exited:
		return b.exitErr
	case <-time.After(timeout):
		if b.Cmd == nil {
			return fmt.Errorf("reader did not stop within %v", timeout)
		}
		_ = b.Cmd.Process.Kill()
		<-b.exited
		return fmt.Errorf("host did not exit within %v of stdin EOF", timeout)
	}
}
