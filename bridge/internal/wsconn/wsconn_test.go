package wsconn

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// side is how the Conn under test was made: upgraded by a server (its
// writes batched) or dialed by a client (New).
type side struct {
	name string
	// pair connects a Conn with opts to a plain gorilla peer over a real
	// loopback socket.
	pair func(t *testing.T, opts *Options) (*Conn, *websocket.Conn)
}

var sides = []side{
	{"upgraded", func(t *testing.T, opts *Options) (*Conn, *websocket.Conn) {
		conns := make(chan *Conn, 1)
		u := &websocket.Upgrader{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := Upgrade(u, w, r, opts)
			if err != nil {
				t.Errorf("upgrade: %v", err)
				return
			}
			conns <- c
		}))
		t.Cleanup(srv.Close)
		peer, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := <-conns
		t.Cleanup(func() { peer.Close(); c.Close(0, ""); <-c.Done() })
		return c, peer
	}},
	{"dialed", func(t *testing.T, opts *Options) (*Conn, *websocket.Conn) {
		peers := make(chan *websocket.Conn, 1)
		u := &websocket.Upgrader{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := u.Upgrade(w, r, nil)
			if err != nil {
				t.Errorf("upgrade: %v", err)
				return
			}
			peers <- ws
		}))
		t.Cleanup(srv.Close)
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := New(ws, opts)
		peer := <-peers
		t.Cleanup(func() { peer.Close(); c.Close(0, ""); <-c.Done() })
		return c, peer
	}},
}

// reader runs c's ReadLoop, collecting the messages; its error arrives on
// the returned channel.
func reader(c *Conn, got chan<- string, tooBig func(int64)) <-chan error {
	errc := make(chan error, 1)
	go func() {
		errc <- c.ReadLoop(func(b []byte) {
			if got != nil {
				got <- string(b)
			}
		}, tooBig)
	}()
	return errc
}

// drain reads and discards the peer's messages (answering pings) until it
// fails, and returns the error that ended it.
func drain(peer *websocket.Conn) <-chan error {
	errc := make(chan error, 1)
	go func() {
		for {
			if _, _, err := peer.ReadMessage(); err != nil {
				errc <- err
				return
			}
		}
	}()
	return errc
}

func TestConn(t *testing.T) {
	cases := []struct {
		name string
		opts Options
		run  func(t *testing.T, c *Conn, peer *websocket.Conn)
	}{
		{"messages both ways", Options{}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			got := make(chan string, 1)
			reader(c, got, nil)
			if err := peer.WriteMessage(websocket.TextMessage, []byte(`{"a":1}`)); err != nil {
				t.Fatal(err)
			}
			if m := <-got; m != `{"a":1}` {
				t.Fatalf("read %q", m)
			}
			for _, m := range []string{"one", "two", "three"} {
				if !c.Send([]byte(m)) {
					t.Fatalf("Send(%q) reported false", m)
				}
			}
			for _, want := range []string{"one", "two", "three"} {
				if _, m, err := peer.ReadMessage(); err != nil || string(m) != want {
					t.Fatalf("peer read %q, %v; want %q", m, err, want)
				}
			}
		}},
		{"oversized message skipped, then refused", Options{MaxMessageSize: 100, ReadLimit: 1000}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			got := make(chan string, 1)
			sizes := make(chan int64, 1)
			errc := reader(c, got, func(n int64) { sizes <- n })
			peer.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), 101))
			if n := <-sizes; n != 101 {
				t.Fatalf("tooBig got %d, want 101", n)
			}
			peer.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("y"), 100))
			if m := <-got; len(m) != 100 {
				t.Fatalf("the next message, at the limit, came as %d bytes", len(m))
			}
			peer.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("z"), 1001))
			if err := <-errc; !errors.Is(err, websocket.ErrReadLimit) {
				t.Fatalf("ReadLoop returned %v after a message over the read limit, want ErrReadLimit", err)
			}
			var ce *websocket.CloseError
			if _, _, err := peer.ReadMessage(); !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
				t.Fatalf("peer read %v, want close 1009", err)
			}
		}},
		{"pong keeps it alive", Options{PongWait: 500 * time.Millisecond, PingPeriod: 25 * time.Millisecond}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			// 50 pings take at least 2.5 PongWaits: only their pongs
			// keep the connection up that long.
			var pings atomic.Int32
			enough := make(chan struct{})
			peer.SetPingHandler(func(data string) error {
				if pings.Add(1) == 50 {
					close(enough)
				}
				return peer.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
			})
			got := make(chan string, 1)
			errc := reader(c, got, nil)
			peerErr := drain(peer)
			select {
			case <-enough:
			case err := <-errc:
				t.Fatalf("dropped after %d pings answered: %v", pings.Load(), err)
			case err := <-peerErr:
				t.Fatalf("the peer's reader failed: %v", err)
			}
			if !c.Send([]byte("still here")) {
				t.Fatal("Send reported false")
			}
		}},
		{"missing pong closes it", Options{PongWait: 100 * time.Millisecond, PingPeriod: 25 * time.Millisecond}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			// The peer never reads, so it never answers a ping.
			err := <-reader(c, nil, nil)
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("ReadLoop returned %v, want a timeout", err)
			}
			<-c.Done()
		}},
		{"close handshake completes", Options{CloseGrace: time.Hour}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			errc := reader(c, nil, nil)
			c.Send([]byte("last words"))
			c.Close(websocket.ClosePolicyViolation, strings.Repeat("é", 100))
			c.Close(websocket.CloseNormalClosure, "a second Close is ignored")
			if c.Send([]byte("too late")) || c.TrySend([]byte("too late")) {
				t.Fatal("a message was queued after Close")
			}
			if _, m, err := peer.ReadMessage(); err != nil || string(m) != "last words" {
				t.Fatalf("peer read %q, %v; want the message sent before Close", m, err)
			}
			// The peer's reader answers the close frame (gorilla's default
			// close handler), which ends c's reader: the writer, which
			// would wait an hour for it, closes the socket at once.
			_, _, err := peer.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || len(ce.Text) > 123 || !strings.HasPrefix(ce.Text, "éé") {
				t.Fatalf("peer read %v, want close 1008 with the reason cut to 123 bytes", err)
			}
			if err := <-errc; !errors.As(err, &ce) {
				t.Fatalf("ReadLoop returned %v, want the peer's close frame", err)
			}
			<-c.Done()
		}},
		{"silent peer: socket dropped after the grace", Options{CloseGrace: 10 * time.Millisecond}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			errc := reader(c, nil, nil)
			c.Close(websocket.CloseGoingAway, "bye")
			<-c.Done()
			var ce *websocket.CloseError
			if err := <-errc; err == nil || errors.As(err, &ce) {
				t.Fatalf("ReadLoop returned %v, want the socket closed under it", err)
			}
		}},
		{"close 0: no close frame, no grace", Options{CloseGrace: time.Hour}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			errc := reader(c, nil, nil)
			c.Close(0, "")
			c.Close(0, "")
			<-c.Done()
			<-errc
			if _, _, err := peer.ReadMessage(); websocket.IsCloseError(err, websocket.CloseNormalClosure) {
				t.Fatalf("peer read %v: no close frame was to be sent", err)
			}
		}},
		{"slow peer: TrySend drops, the queue stays bounded", Options{SendQueue: 4, WriteWait: time.Hour}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			reader(c, nil, nil)
			msg := make([]byte, 64<<10)
			for i := 0; c.TrySend(msg); i++ {
				if i == 10_000 { // 640 MiB: far more than the socket buffers hold
					t.Fatal("TrySend never found the queue full")
				}
			}
			select {
			case <-c.Done():
				t.Fatal("a full queue closed the connection; TrySend only drops")
			default:
			}
		}},
		{"slow peer: Send gives up and closes", Options{SendQueue: 4, WriteWait: 50 * time.Millisecond}, func(t *testing.T, c *Conn, peer *websocket.Conn) {
			errc := reader(c, nil, nil)
			msg := make([]byte, 64<<10)
			for i := 0; c.Send(msg); i++ {
				if i == 10_000 {
					t.Fatal("Send never gave up on a peer that does not read")
				}
			}
			<-c.Done()
			if err := <-errc; err == nil {
				t.Fatal("ReadLoop returned nil")
			}
		}},
	}
	for _, s := range sides {
		t.Run(s.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					c, peer := s.pair(t, &tc.opts)
					tc.run(t, c, peer)
				})
			}
		})
	}
}

func TestOptionsDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   *Options
		want Options
	}{
		{"nil", nil, Options{PongWait: 60 * time.Second, PingPeriod: 54 * time.Second, WriteWait: 10 * time.Second,
			CloseGrace: time.Second, MaxMessageSize: maxMessageSize, ReadLimit: 4 * maxMessageSize, SendQueue: 64}},
		{"ping period from pong wait", &Options{PongWait: 10 * time.Second}, Options{PongWait: 10 * time.Second, PingPeriod: 9 * time.Second,
			WriteWait: 10 * time.Second, CloseGrace: time.Second, MaxMessageSize: maxMessageSize, ReadLimit: 4 * maxMessageSize, SendQueue: 64}},
		{"ping period honoured, read limit at least the message size", &Options{PingPeriod: 25 * time.Second, PongWait: 50 * time.Second, MaxMessageSize: 10, ReadLimit: 5},
			Options{PongWait: 50 * time.Second, PingPeriod: 25 * time.Second, WriteWait: 10 * time.Second, CloseGrace: time.Second,
				MaxMessageSize: 10, ReadLimit: 10, SendQueue: 64}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.withDefaults(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
