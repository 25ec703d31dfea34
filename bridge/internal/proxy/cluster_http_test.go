package proxy

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver/jetstreamkv"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/internal/testutil"
)

// roundRobin stands for the load balancer in front of a cluster (Caddy's
// reverse_proxy with lb_policy round_robin): each request goes to the next
// node, the Host header kept.
type roundRobin struct {
	nodes []*url.URL
	next  atomic.Uint64
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := rr.nodes[rr.next.Add(1)%uint64(len(rr.nodes))]
	// The body whole first, as a buffering balancer does: net/http ends a
	// request's body once the response begins.
	if body, err := io.ReadAll(r.Body); err == nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		FlushInterval: -1,
	}).ServeHTTP(w, r)
}

// clusterHTTPNodes starts n nodes with the HTTP side on behind one
// round-robin load balancer, whose URL is their public URL; their OAuth
// state is in JetStream KV (prefix bbtest), as in a real cluster: each
// node reads it through its own store, sealed with its own keyring.
func clusterHTTPNodes(tb testing.TB, n int) (lb *httptest.Server, nodes []*testProxy) {
	tb.Helper()
	natsURL := startNATS(tb)
	rr := &roundRobin{}
	lb = httptest.NewServer(rr)
	tb.Cleanup(lb.Close)
	keys, err := token.NewHS256([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		self := "http://" + ln.Addr().String()
		nc, err := nats.Connect(natsURL, nats.ReconnectBufSize(-1), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			tb.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			tb.Fatal(err)
		}
		ring := testRing()
		kv, err := jetstreamkv.New(js, ring, "bbtest", 1, nil)
		if err != nil {
			tb.Fatal(err)
		}
		srv, err := New(Options{Keys: keys,
			HTTP: &HTTPOptions{PublicURL: lb.URL, KV: kv, Identity: authserver.IdentityConfig{Password: testPassword},
				Users: map[string]string{"password:owner": "alice"}},
			Cluster: &ClusterOptions{Keyring: ring, Conn: nc, Node: "node" + string(rune('a'+i)), PresenceTTL: 2 * time.Second, AdvertiseURL: self}})
		if err != nil {
			tb.Fatal(err)
		}
		hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: srv.Handler()}}
		tp := &testProxy{srv: srv, hs: hs, keys: keys, natsURL: natsURL}
		hs.Config.ErrorLog = log.New(panicWatch{&tp.panicked}, "", 0)
		hs.Start()
		tp.url = "ws" + strings.TrimPrefix(hs.URL, "http")
		tb.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
			hs.Close()
			nc.Close()
			if tp.panicked.Load() {
				tb.Errorf("a handler panicked")
			}
		})
		u, _ := url.Parse(self)
		rr.nodes = append(rr.nodes, u)
		nodes = append(nodes, tp)
	}
	return lb, nodes
}

// TestClusterHTTPBehindLoadBalancer: a person signs in and an MCP client
// uses a browser through a load balancer that sends each request to the
// next node: the sign-in crosses nodes (shared OAuth state), the browser is
// on one node, and every request of the session reaches the node that
// holds the session, whichever node got it.
func TestClusterHTTPBehindLoadBalancer(t *testing.T) {
	eras(t, func(t *testing.T, era string) {
		lb, nodes := clusterHTTPNodes(t, 3)
		b := startBrowser(t, nodes[0], "alice", "Chrome")
		p := passwordPerson()
		// The browser shows on every node before the client starts.
		for _, n := range nodes {
			testutil.WaitFor(t, "alice's browser on the node", func() bool { return len(n.srv.extensionsOf("alice", "browser")) == 1 })
		}
		cs := sdkClient(t, lb.URL+"/mcp", era, p, nil)
		for i := 0; i < 12; i++ {
			if got := callTool(t, cs, "echo", map[string]any{"message": "hi"}); got != "Chrome: hi" {
				t.Fatalf("call %d: echo answered %q", i, got)
			}
		}
		if era != eraStateless {
			forwarded := 0.0
			for _, n := range nodes {
				forwarded += n.srv.cluster.m.httpForwarded.Value()
			}
			if forwarded == 0 {
				t.Errorf("no request of the session was passed to its node: the load balancer never sent one elsewhere?")
			}
		}
		if len(b.calls) == 0 {
			t.Errorf("the browser on node a got no call")
		}
	})
}
