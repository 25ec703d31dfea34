package testbrowser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// Environment of an echo extension process (see RunEchoIfAsked).
const (
	// EnvEcho is "stdio" (behind a host, like the real extension) or
	// "socket:PATH" (attached straight to the bridge's socket).
	EnvEcho = "BB_ECHO_EXTENSION"
	// EnvEchoInstance is the instance id the echo extension says hello with.
	EnvEchoInstance = "BB_ECHO_INSTANCE"
)

// RunEchoIfAsked turns a test binary into an echo extension when EnvEcho
// is set, and then exits; call it first in TestMain. The echo extension is
// a separate process, as Chrome is, so that measurements with and without
// the host cross the same process boundaries except the host's own. It
// answers every request with its params and says hello when attached.
func RunEchoIfAsked() {
	mode := os.Getenv(EnvEcho)
	if mode == "" {
		return
	}
	instance := os.Getenv(EnvEchoInstance)
	var err error
	switch {
	case mode == "stdio":
		err = echo(os.Stdin, os.Stdout, instance, false)
	case strings.HasPrefix(mode, "socket:"):
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, derr := ipc.Dial(ctx, strings.TrimPrefix(mode, "socket:"))
		cancel()
		if derr != nil {
			err = derr
			break
		}
		err = echo(c, c, instance, true)
	default:
		err = fmt.Errorf("%s=%q: want stdio or socket:PATH", EnvEcho, mode)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, "echo extension:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// echoTools is the echo extension's tool list: one tool that answers with
// its arguments.
const echoTools = `{"tools":[{"name":"echo","description":"Answer with the arguments given, as JSON text.",` +
	`"inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"annotations":{"readOnlyHint":true}}]}`

func echo(r io.Reader, w io.Writer, instance string, helloNow bool) error {
	br := bufio.NewReaderSize(r, 1<<20)
	bw := nativemsg.NewBrowserWriter(w, "e") // plain frames: chunks only above 1 MiB
	send := func(b []byte) error { return nativemsg.WriteFrame(bw.W, b, nativemsg.MaxLink) }
	hello := func() error {
		p := protocol.HelloParams{InstanceID: instance}
		p.Browser.Name, p.Browser.Version = "EchoBrowser", "1.0"
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "ext:hello", "method": protocol.Hello, "params": p})
		return send(b)
	}
	if helloNow {
		// Straight on the socket, with no host: attach first, as the
		// bundled extension's host does (the bridge refuses hello before).
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "host:1", "method": protocol.HostAttach,
			"params": protocol.HostAttachParams{Protocol: protocol.Version, HostVersion: "echo", PID: os.Getpid(), Origin: extension.Origin()}})
		if err := send(b); err != nil {
			return err
		}
		if err := hello(); err != nil {
			return err
		}
	}
	var ra nativemsg.Reassembler
	for {
		frame, err := nativemsg.ReadFrame(br, nativemsg.MaxLink)
		if err != nil {
			return err
		}
		msg, err := ra.Add(frame)
		switch {
		case errors.Is(err, nativemsg.ErrNotChunk):
			msg = frame
		case err != nil:
			return err
		case msg == nil:
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			return fmt.Errorf("bad message: %w", err)
		}
		switch {
		case m.Method == protocol.HostState:
			if strings.Contains(string(m.Params), `"state":"connected"`) {
				if err := hello(); err != nil {
					return err
				}
			}
		case m.Method != "" && m.ID != nil:
			params := m.Params
			switch {
			case params == nil:
				params = json.RawMessage("null")
			case m.Method == "tools/list":
				params = json.RawMessage(echoTools)
			case m.Method == "tools/call":
				// The tool "echo" answers with its arguments as text.
				var call struct {
					Arguments json.RawMessage `json:"arguments"`
				}
				_ = json.Unmarshal(params, &call)
				text, _ := json.Marshal(string(call.Arguments))
				params = json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`)
			}
			reply := make([]byte, 0, len(params)+len(m.ID)+40)
			reply = append(reply, `{"jsonrpc":"2.0","id":`...)
			reply = append(reply, m.ID...)
			reply = append(reply, `,"result":`...)
			reply = append(reply, params...)
			reply = append(reply, '}')
			if err := send(reply); err != nil {
				return err
			}
		}
	}
}
