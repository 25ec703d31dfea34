package proxy

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// FuzzRouting sends arbitrary frames (one per line of each input) from an
// MCP client and from the extension it is connected to, while another MCP
// client of the same user has calls in flight on that extension. The proxy
// must not panic, the bystander must receive nothing but the replies to its
// own requests, status and list_changed notifications (no progress: the
// fuzzer cannot know its connection id), and it must still be served.
func FuzzRouting(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"createTab"}`+"\n"+`{"jsonrpc":"2.0","id":"proxy:1","method":"x"}`),
		[]byte(`{"jsonrpc":"2.0","id":"conn-x:1","result":{}}`+"\n"+`{"jsonrpc":"2.0","id":"proxy:1","result":{}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"method":"disconnect"}`+"\n"+`{"jsonrpc":"2.0","id":3,"method":"connect","params":{"extension_id":"ext-1"}}`),
		[]byte(`{"jsonrpc":"2.0","id":"ext:1","method":"createTab"}`+"\n"+`not json`))
	f.Add([]byte(`[{"jsonrpc":"2.0"}]`+"\n"+`{"jsonrpc":"2.0","id":1,"result":1}`), []byte(`{"jsonrpc":"2.0","id":1,"error":"x"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":5,"method":"hold"}`), []byte(`{"jsonrpc":"2.0","method":"status"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`+"\n"+`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"conn-x:1"}}`),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/progress","requestId":"conn-x:1","params":{"progressToken":1,"progress":1}}`+"\n"+
			`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`+"\n"+`{"jsonrpc":"2.0","method":"disconnected","requestId":1}`))
	tp := newTestProxy(f, Options{ConnRate: -1, UserRate: -1, Strikes: -1, MaxMessageSize: 4096})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, mcpFrames, extFrames []byte) {
		ext := tp.extension(t, "alice", fmt.Sprint("Chrome ", n.Add(1))).ready(t)
		attacker, bystander := tp.mcp(t, "alice"), tp.mcp(t, "alice")
		connectTo(t, attacker, ext.id)
		connectTo(t, bystander, ext.id)
		held := bystander.start(1, "hold", nil)
		<-ext.seen
		for _, fr := range bytes.Split(mcpFrames, []byte("\n")) {
			attacker.sendRaw(fr)
		}
		for _, fr := range bytes.Split(extFrames, []byte("\n")) {
			ext.sendRaw(fr)
		}
		if r := bystander.call(2, "getTabs", nil); r.Error != nil {
			t.Fatalf("bystander not served: %s", r.Error)
		}
		select {
		case r := <-held:
			t.Fatalf("bystander's held call answered by someone else: %s %s", r.Result, r.Error)
		default:
		}
		for {
			select {
			case m := <-bystander.notes:
				// The extension serves the bystander too: its list_changed
				// reaches every client connected to it.
				if m.Method != relaywire.MethodStatus && !isListChanged(m.Method) {
					t.Fatalf("bystander received %+v", m)
				}
				continue
			case <-time.After(10 * time.Millisecond):
			}
			break
		}
		attacker.ws.Close()
		bystander.ws.Close()
		ext.ws.Close()
		if tp.panicked.Load() {
			t.Fatal("the proxy panicked")
		}
	})
}
