package natsembed

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// guard bounds a wait that only a deadlock would make long.
const guard = 60 * time.Second

func connect(t *testing.T, s *Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := s.Connect(opts...)
	if err != nil {
		t.Fatalf("connecting to %s: %v", s.Name(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func kv(t *testing.T, nc *nats.Conn, replicas int) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	b, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "test", Replicas: replicas, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatalf("a key-value bucket with %d replicas: %v", replicas, err)
	}
	return b
}

func get(t *testing.T, b jetstream.KeyValue, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	e, err := b.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return string(e.Value())
}

func TestStartAlone(t *testing.T) {
	for _, tc := range []struct {
		name, listen string
		wantURL      bool
	}{
		{"in-process only", "", false},
		{"listening on a free port", "127.0.0.1:0", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(Options{Name: "alone", Listen: tc.listen, StoreDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown()
			if u := s.ClientURL(); (u != "") != tc.wantURL || (tc.wantURL && strings.HasSuffix(u, ":0")) {
				t.Fatalf("ClientURL %q", u)
			}
			nc := connect(t, s)
			b := kv(t, nc, 1)
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			if _, err := b.Put(ctx, "k", []byte("v")); err != nil {
				t.Fatal(err)
			}
			if v := get(t, b, "k"); v != "v" {
				t.Fatalf("got %q", v)
			}
			// A core subscription answers a request: the server routes messages.
			sub, err := nc.Subscribe("echo", func(m *nats.Msg) { m.Respond(append([]byte("re: "), m.Data...)) })
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			reply, err := nc.Request("echo", []byte("hi"), guard)
			if err != nil || string(reply.Data) != "re: hi" {
				t.Fatalf("request: %v %v", reply, err)
			}
		})
	}
}

func TestStartRefuses(t *testing.T) {
	taken, err := Start(Options{Name: "taken", Listen: "127.0.0.1:0", StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Shutdown()
	busy := strings.TrimPrefix(taken.ClientURL(), "nats://")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"cluster listener without a name", Options{ClusterListen: "127.0.0.1:0"}, "needs a cluster name"},
		{"routes without a cluster listener", Options{Routes: []string{"nats-route://127.0.0.1:6222"}}, "need a route listener"},
		{"a port out of range", Options{Listen: "127.0.0.1:70000"}, "not a number from 0 to 65535"},
		{"no port", Options{Listen: "127.0.0.1"}, "missing port"},
		{"a route that is no URL", Options{Cluster: "c", ClusterListen: "127.0.0.1:0", Routes: []string{"::"}}, "not a URL like nats-route://"},
		{"a port in use", Options{Listen: busy}, "not ready for connections"},
		{"clients beyond loopback without auth", Options{Listen: "0.0.0.0:0"}, "client listener 0.0.0.0:0 is reachable beyond this machine and has no authentication"},
		{"routes beyond loopback without auth", Options{Cluster: "c", ClusterListen: ":0"}, "route listener :0 is reachable beyond"},
		{"auth without Current", Options{Auth: &Auth{Check: func(string, string) bool { return true }}}, "needs both Check and Current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.StoreDir = t.TempDir()
			s, err := Start(tc.opts)
			if err == nil {
				s.Shutdown()
				t.Fatalf("Start(%+v) succeeded", tc.opts)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want %q", err, tc.want)
			}
		})
	}
}

// The temporary store is the server's own: Shutdown removes it, twice is
// harmless, and Restart after it is refused.
func TestShutdownRemovesTempStore(t *testing.T) {
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := s.Options().StoreDir
	if dir == "" {
		t.Fatal("no store directory")
	}
	s.Shutdown()
	s.Shutdown()
	if _, err := s.InProcessConn(); !errors.Is(err, ErrStopped) {
		t.Fatalf("InProcessConn after Shutdown: %v", err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Shutdown succeeded")
	}
	if _, err := s.Connect(nats.MaxReconnects(0)); err == nil {
		t.Fatal("Connect after Shutdown succeeded")
	}
	if entries, err := os.ReadDir(dir); err == nil {
		t.Fatalf("the temporary store is still there: %v", entries)
	}
}

// NATS restarted under a client: the client sees the disconnect,
// reconnects by itself to the same URL (or in-process), and the data in
// JetStream's file store is still there.
func TestRestart(t *testing.T) {
	for _, tc := range []struct{ name, listen string }{
		{"listening", "127.0.0.1:0"},
		{"in-process", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Start(Options{Name: "r", Listen: tc.listen, StoreDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown()
			url := s.ClientURL()
			down, back := make(chan struct{}, 1), make(chan struct{}, 1)
			nc := connect(t, s,
				nats.DisconnectErrHandler(func(*nats.Conn, error) { signal(down) }),
				nats.ReconnectHandler(func(*nats.Conn) { signal(back) }),
				nats.ReconnectBufSize(-1))
			b := kv(t, nc, 1)
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			if _, err := b.Put(ctx, "k", []byte("before")); err != nil {
				t.Fatal(err)
			}

			s.Stop()
			wait(t, down, "the disconnect")
			// With no reconnect buffer, a publish while NATS is down fails
			// at once instead of going out late.
			if err := nc.Publish("x", []byte("late")); err == nil {
				t.Error("a publish while NATS is down succeeded")
			}
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
			wait(t, back, "the reconnect")
			if s.ClientURL() != url {
				t.Errorf("ClientURL moved from %q to %q", url, s.ClientURL())
			}
			if v := get(t, b, "k"); v != "before" {
				t.Fatalf("after the restart: %q", v)
			}
		})
	}
}

// Three servers in a cluster: a bucket with three replicas, written
// through one server, reads through another; a message published on one
// reaches a subscriber on another; a member restarted rejoins with its
// data.
func TestCluster(t *testing.T) {
	servers, err := StartCluster(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range servers {
			s.Shutdown()
		}
	}()
	nc1, nc3 := connect(t, servers[0]), connect(t, servers[2])
	b1 := kv(t, nc1, 3)
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if _, err := b1.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	b3 := kv(t, nc3, 3)
	if v := get(t, b3, "k"); v != "v1" {
		t.Fatalf("read through n3: %q", v)
	}

	got := make(chan string, 1)
	sub, err := nc3.Subscribe("across", func(m *nats.Msg) {
		select {
		case got <- string(m.Data):
		default:
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc3.Flush(); err != nil {
		t.Fatal(err)
	}
	// The subscription reaches n1 over a route a moment later, and nats
	// has no notice of that: publish until one arrives.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(guard)
	for received := false; !received; {
		if err := nc1.Publish("across", []byte("from n1")); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			if m != "from n1" {
				t.Fatalf("received %q", m)
			}
			received = true
		case <-tick.C:
		case <-deadline:
			t.Fatal("a message published on n1 never reached n3's subscriber")
		}
	}

	servers[1].Stop()
	if err := servers[1].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := WaitCluster(ctx, servers); err != nil {
		t.Fatal(err)
	}
	nc2 := connect(t, servers[1])
	if v := get(t, kv(t, nc2, 3), "k"); v != "v1" {
		t.Fatalf("read through the restarted n2: %q", v)
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func wait(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("no %s", what)
	}
}

// Clustered servers without a client listener (as `serve --nats embedded
// --nats-routes` without --nats-listen): nats-server routes only once a
// client listener is up, so each still gets a loopback one; clients stay
// in-process.
func TestClusterInProcess(t *testing.T) {
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(p))
	}
	var servers []*Server
	defer func() {
		for _, s := range servers {
			s.Shutdown()
		}
	}()
	for i, p := range ports {
		s, err := Start(Options{Name: "p" + strconv.Itoa(i), StoreDir: t.TempDir(), Cluster: "c",
			ClusterListen: "127.0.0.1:" + strconv.Itoa(p), Routes: routes})
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
		if s.ClientURL() != "" {
			t.Errorf("server %d names a client URL: %s", i, s.ClientURL())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	// What `serve --nats-replicas 3` waits for before its buckets: each
	// server on its own sees three online.
	for _, s := range servers {
		if err := s.WaitJetStreamPeers(ctx, 3); err != nil {
			t.Fatal(err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelShort()
	if err := servers[0].WaitJetStreamPeers(short, 4); err == nil {
		t.Error("a cluster of three has four servers online")
	}
	b := kv(t, connect(t, servers[0]), 3)
	if _, err := b.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v := get(t, kv(t, connect(t, servers[2]), 3), "k"); v != "v" {
		t.Fatalf("read through p2: %q", v)
	}
}

// testAuth is a fixed user and password, as the proxy derives from its
// deployment's secret.
func testAuth(password string) *Auth {
	return &Auth{
		Check:   func(u, p string) bool { return u == "node" && p == password },
		Current: func() (string, string) { return "node", password },
	}
}

// TestAuth: a server with Auth refuses clients without the user and
// password (and with a wrong one); its own Connect signs in, JetStream
// works for it; servers with Auth form a cluster over authenticated routes
// and a server without the password cannot join it.
func TestAuth(t *testing.T) {
	ports, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	route := func(i int) string { return "nats-route://127.0.0.1:" + strconv.Itoa(ports[i]) }
	var servers []*Server
	defer func() {
		for _, s := range servers {
			s.Shutdown()
		}
	}()
	for i := range 2 {
		s, err := Start(Options{Name: "a" + strconv.Itoa(i), Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Cluster: "c",
			ClusterListen: "127.0.0.1:" + strconv.Itoa(ports[i]), Routes: []string{route(0), route(1)}, Auth: testAuth("right")})
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := WaitCluster(ctx, servers); err != nil {
		t.Fatalf("servers with auth over authenticated routes: %v", err)
	}
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"anonymous", nil},
		{"a wrong password", []nats.Option{nats.UserInfo("node", "wrong")}},
		{"another user", []nats.Option{nats.UserInfo("admin", "right")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(servers[0].ClientURL(), append(tc.opts, nats.MaxReconnects(0))...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
				t.Fatalf("refused with %v, want an authorization violation", err)
			}
		})
	}
	b := kv(t, connect(t, servers[0]), 2)
	if _, err := b.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if got := get(t, kv(t, connect(t, servers[1]), 2), "k"); got != "v" {
		t.Fatalf("read back through the other server: %q", got)
	}
	// A server that knows the routes but not the password stays out.
	rogue, err := Start(Options{Name: "rogue", StoreDir: t.TempDir(), Cluster: "c",
		ClusterListen: "127.0.0.1:" + strconv.Itoa(ports[2]), Routes: []string{route(0), route(1)}})
	if err != nil {
		t.Fatal(err)
	}
	servers = append(servers, rogue)
	short, cancelShort := context.WithTimeout(ctx, 3*time.Second)
	defer cancelShort()
	if err := servers[0].WaitJetStreamPeers(short, 3); err == nil {
		t.Fatal("a server without the password joined the cluster")
	}
	rogue.mu.Lock()
	ns := rogue.ns
	rogue.mu.Unlock()
	if n := ns.NumRoutes(); n != 0 {
		t.Fatalf("the rogue server holds %d routes", n)
	}
}
