package hostlink

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
)

// goodOrigin is the origin the tests' servers allow.
const goodOrigin = "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/"

// peerDeadline bounds every read and write of a test peer: long, so a busy
// machine does not fail the tests, yet a hang still ends.
const peerDeadline = 30 * time.Second

// peer is a raw connection to the bridge socket that writes and reads
// frames itself, so a test sees exactly what the bridge answers.
type peer struct {
	t    testing.TB
	c    net.Conn
	next int
}

// message is any JSON-RPC message the bridge writes.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func dialPeer(t testing.TB, socket string) *peer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), peerDeadline)
	defer cancel()
	c, err := ipc.Dial(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &peer{t: t, c: c}
}

func (p *peer) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p.c.SetWriteDeadline(time.Now().Add(peerDeadline))
	return nativemsg.WriteFrame(p.c, b, nativemsg.MaxLink)
}

// read returns the next message from the bridge.
func (p *peer) read() (message, error) {
	p.c.SetReadDeadline(time.Now().Add(peerDeadline))
	f, err := nativemsg.ReadFrame(p.c, nativemsg.MaxLink)
	if err != nil {
		return message{}, err
	}
	var m message
	if err := json.Unmarshal(f, &m); err != nil {
		return message{}, fmt.Errorf("the bridge wrote a frame that is not JSON: %q", f)
	}
	return m, nil
}

// call sends a request and returns its reply. Any request from the bridge
// arriving first fails the test: the tests' peers never expect one here.
func (p *peer) call(method string, params any) (message, error) {
	p.next++
	id := "t:" + strconv.Itoa(p.next)
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if err := p.write(req); err != nil {
		return message{}, err
	}
	m, err := p.read()
	if err != nil {
		return m, err
	}
	if m.Method != "" {
		p.t.Fatalf("the bridge sent %s (params %s) while %s awaited its reply", m.Method, m.Params, method)
	}
	if want, _ := json.Marshal(id); string(m.ID) != string(want) {
		p.t.Fatalf("reply to %s has id %s, want %s", method, m.ID, want)
	}
	return m, nil
}

// mustCall is call for a request that must succeed.
func (p *peer) mustCall(method string, params any) json.RawMessage {
	p.t.Helper()
	m, err := p.call(method, params)
	if err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
	if m.Error != nil {
		p.t.Fatalf("%s: error %d %s", method, m.Error.Code, m.Error.Message)
	}
	return m.Result
}

func attachParams(origin string) map[string]any {
	return map[string]any{"protocol": 1, "hostVersion": "test", "pid": 4242, "origin": origin}
}

func helloParams(instance string) map[string]any {
	return map[string]any{"instanceId": instance, "browser": map[string]any{"name": "TestBrowser", "version": "1.0"},
		"extension": map[string]any{"id": "test", "version": "0.0.1"}}
}
