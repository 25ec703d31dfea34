package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver/jetstreamkv"
	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/internal/natsembed"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
)

// natsEmbedded is --nats's value that starts a NATS server in the process.
const natsEmbedded = "embedded"

// Reconnecting to NATS: forever, quickly; a publish while disconnected
// fails at once (no reconnect buffer) instead of reaching a node late,
// after its caller was told the call failed.
const (
	natsReconnectWait = 250 * time.Millisecond
	// natsJetStreamWait bounds how long a clustered embedded server waits
	// for its cluster's JetStream leader (the other servers starting).
	natsJetStreamWait = 2 * time.Minute
	// natsJetStreamReady bounds how long a node asks NATS whether it has
	// JetStream.
	natsJetStreamReady = 30 * time.Second
)

// embeddedClusterName is the route cluster name of embedded servers: they
// only route to each other, all started by this command.
const embeddedClusterName = "browserbridge"

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// clusterFlags are serve's flags for joining a cluster of proxies over
// NATS (docs/proxy-cluster.md).
type clusterFlags struct {
	nats, node, prefix, advertise        string
	listen, store, routes, clusterListen string
	creds, ca, cert, key                 string
	replicas                             int
	presenceTTL                          time.Duration
	set                                  map[string]bool // flags given on the command line
	embedded                             bool
	urls                                 []string
	routeList                            []string
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.nats, "nats", "", `join a cluster of proxies: NATS server URLs, comma-separated (nats://a:4222,nats://b:4222), or "embedded" to run a NATS server in this process`)
	fs.StringVar(&c.node, "node", "", "with --nats: this node's name, unique in the cluster (default: the host name)")
	fs.StringVar(&c.advertise, "advertise-url", "", "with --nats: where the other nodes reach this node (http://proxy-1:8787), so a Streamable HTTP session's requests that a load balancer sends to another node are passed here")
	fs.StringVar(&c.prefix, "nats-prefix", "browserbridge", "with --nats: the first part of every subject and bucket name, so deployments can share one NATS")
	fs.IntVar(&c.replicas, "nats-replicas", 1, "with --nats: JetStream copies of the cluster's buckets (3 for a NATS cluster of three)")
	fs.DurationVar(&c.presenceTTL, "presence-ttl", proxy.DefaultPresenceTTL, "with --nats: how long a node that stopped heartbeating is taken for alive")
	fs.StringVar(&c.creds, "nats-creds", "", "with --nats URLs: a NATS credentials file (user JWT and NKey seed)")
	fs.StringVar(&c.ca, "nats-ca", "", "with --nats URLs: CA certificates (PEM) that sign the NATS servers' TLS certificates")
	fs.StringVar(&c.cert, "nats-cert", "", "with --nats URLs: a TLS client certificate (PEM) for NATS, with --nats-key")
	fs.StringVar(&c.key, "nats-key", "", "with --nats URLs: the TLS client certificate's key (PEM)")
	fs.StringVar(&c.listen, "nats-listen", "", "with --nats embedded: also take NATS clients on host:port (other nodes' --nats)")
	fs.StringVar(&c.store, "nats-store", "", "with --nats embedded: JetStream's directory (default: browserbridge-nats-NODE in the temporary directory)")
	fs.StringVar(&c.routes, "nats-routes", "", "with --nats embedded: the route URLs of a cluster of embedded servers, comma-separated (nats-route://a:6222,...)")
	fs.StringVar(&c.clusterListen, "nats-cluster-listen", "", "with --nats embedded and --nats-routes: this server's route listener, host:port")
}

// validate checks the flags after fs.Parse; oauthState is --oauth-state.
func (c *clusterFlags) validate(fs *flag.FlagSet, oauthState string) error {
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	if c.nats == "" {
		for _, name := range []string{"node", "advertise-url", "nats-prefix", "nats-replicas", "presence-ttl", "nats-creds", "nats-ca", "nats-cert", "nats-key",
			"nats-listen", "nats-store", "nats-routes", "nats-cluster-listen"} {
			if c.set[name] {
				return fmt.Errorf("--%s goes with --nats (a node of a cluster); without --nats the proxy runs alone", name)
			}
		}
		return nil
	}
	if oauthState != "" {
		return errors.New("--oauth-state does not go with --nats: a cluster keeps the OAuth state in JetStream, where every node reads it")
	}
	if c.node == "" {
		c.node = hostNode()
	}
	if !validName.MatchString(c.node) {
		return fmt.Errorf("--node %q: a node name is 1 to 64 letters, digits, '-' or '_'", c.node)
	}
	if c.advertise != "" {
		if u, err := url.Parse(c.advertise); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("--advertise-url %q: the URL the other nodes reach this node's listener at, http(s)://host:port, no path", redact(c.advertise))
		}
	}
	if !validName.MatchString(c.prefix) {
		return fmt.Errorf("--nats-prefix %q: letters, digits, '-' or '_' only", c.prefix)
	}
	if c.replicas < 1 || c.replicas > 5 {
		return fmt.Errorf("--nats-replicas %d: JetStream keeps 1 to 5 copies", c.replicas)
	}
	if c.presenceTTL < time.Second {
		return fmt.Errorf("--presence-ttl %v: at least 1s (heartbeats go out every fifth of it)", c.presenceTTL)
	}
	c.embedded = c.nats == natsEmbedded
	if c.embedded {
		for _, name := range []string{"nats-creds", "nats-ca", "nats-cert", "nats-key"} {
			if c.set[name] {
				return fmt.Errorf("--%s is for an external NATS (--nats nats://…); this node's own connection to --nats embedded is in-process", name)
			}
		}
		if c.routes != "" {
			c.routeList = splitList(c.routes)
			for _, r := range c.routeList {
				if u, err := url.Parse(r); err != nil || u.Scheme != "nats-route" || u.Host == "" {
					return fmt.Errorf("--nats-routes: %q is not a route URL like nats-route://host:6222", redact(r))
				}
			}
		}
		if (c.routes == "") != (c.clusterListen == "") {
			return errors.New("--nats-routes and --nats-cluster-listen go together: the embedded servers of a cluster listen for each other's routes")
		}
		if c.routes == "" && c.replicas > 1 {
			return fmt.Errorf("--nats-replicas %d needs a NATS cluster (--nats-routes): one embedded server keeps one copy", c.replicas)
		}
		return nil
	}
	for _, name := range []string{"nats-listen", "nats-store", "nats-routes", "nats-cluster-listen"} {
		if c.set[name] {
			return fmt.Errorf("--%s goes with --nats embedded: an external NATS server is configured on its own", name)
		}
	}
	if (c.cert == "") != (c.key == "") {
		return errors.New("--nats-cert and --nats-key go together")
	}
	c.urls = splitList(c.nats)
	if len(c.urls) == 0 {
		return errors.New(`--nats: no URL; give nats://host:4222 (comma-separated for several) or "embedded"`)
	}
	for _, s := range c.urls {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return fmt.Errorf(`--nats: %q is not a NATS URL like nats://host:4222 (or "embedded")`, redact(s))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("--nats: %q: the scheme is nats, tls, ws or wss", redact(s))
		}
	}
	return nil
}

// cluster is a node's NATS: its connection, and the embedded server when
// there is one.
type cluster struct {
	opts     *proxy.ClusterOptions
	js       jetstream.JetStream
	embedded *natsembed.Server
	conn     *nats.Conn
}

// join connects to NATS (starting the embedded server first if asked) and
// returns the proxy's ClusterOptions. Close releases it all once the proxy
// has stopped.
//
// ring seals the node's traffic; it also gives the embedded server's user
// and password (required of every client and route), and the credentials
// this node signs in to an external NATS with when it is given no other
// (another node's embedded server).
func (c *clusterFlags) join(ctx context.Context, log *slog.Logger, ring *clusterseal.Keyring) (*cluster, error) {
	log = log.With("node", c.node)
	cl := &cluster{}
	copts := []nats.Option{
		nats.Name("browserbridge-proxy " + c.node),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(natsReconnectWait),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected: cluster calls fail until it reconnects", "err", err)
			} else {
				log.Info("NATS disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "server", redact(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Warn("NATS error", "subject", subject, "err", err)
		}),
	}
	if c.embedded {
		store := c.store
		if store == "" {
			store = filepath.Join(os.TempDir(), "browserbridge-nats-"+c.node)
		}
		if err := os.MkdirAll(store, 0o700); err != nil {
			return nil, fmt.Errorf("--nats-store: %w", err)
		}
		eo := natsembed.Options{Name: c.node, Listen: c.listen, StoreDir: store, Logger: log.With("component", "nats"),
			Auth: &natsembed.Auth{Check: ring.CheckNATSUser, Current: ring.NATSUser}}
		if c.routes != "" {
			eo.Cluster, eo.ClusterListen, eo.Routes = embeddedClusterName, c.clusterListen, c.routeList
		}
		s, err := natsembed.Start(eo)
		if err != nil {
			return nil, fmt.Errorf("starting the embedded NATS server: %w", err)
		}
		cl.embedded = s
		if c.routes != "" {
			// The buckets' replicas can be placed only once that many
			// servers are in the JetStream cluster.
			log.Info("waiting for the NATS cluster's JetStream (the servers of --nats-routes)", "routes", len(c.routeList), "replicas", c.replicas)
			wctx, cancel := context.WithTimeout(ctx, natsJetStreamWait)
			err := s.WaitJetStreamPeers(wctx, c.replicas)
			cancel()
			if err != nil {
				s.Shutdown()
				return nil, err
			}
		}
		if cl.conn, err = s.Connect(copts...); err != nil {
			s.Shutdown()
			return nil, fmt.Errorf("connecting to the embedded NATS server: %w", err)
		}
		log.Info("embedded NATS server", "client_url", s.ClientURL(), "route_url", s.RouteURL(), "store", store)
	} else {
		if c.creds != "" {
			if _, err := os.Stat(c.creds); err != nil {
				return nil, fmt.Errorf("--nats-creds: %w", err)
			}
			copts = append(copts, nats.UserCredentials(c.creds))
		} else if !slices.ContainsFunc(c.urls, hasUser) {
			// No credentials of its own: sign in as the nodes of this
			// deployment do to an embedded server (a NATS without
			// authentication ignores them).
			copts = append(copts, nats.UserInfoHandler(ring.NATSUser))
		}
		if c.ca != "" {
			copts = append(copts, nats.RootCAs(c.ca))
		}
		if c.cert != "" {
			copts = append(copts, nats.ClientCert(c.cert, c.key))
		}
		nc, err := nats.Connect(strings.Join(c.urls, ","), copts...)
		if err != nil {
			return nil, fmt.Errorf("connecting to NATS at %s: %w", redactList(c.urls), err)
		}
		cl.conn = nc
		log.Info("connected to NATS", "server", redact(nc.ConnectedUrl()))
	}
	js, err := jetstream.New(cl.conn)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("NATS JetStream: %w", err)
	}
	// JetStream must be enabled: the cluster keeps presence and the OAuth
	// state there. Asking now makes a NATS without -js a clear start-up
	// error rather than a failure on the first sign-in. A JetStream cluster
	// that has just elected its leader may leave a request unanswered, so
	// each try is short and a lost one is asked again.
	if err := jetStreamReady(ctx, js); err != nil {
		cl.Close()
		return nil, fmt.Errorf("NATS JetStream (the cluster needs it: nats-server -js): %w", err)
	}
	cl.js = js
	cl.opts = &proxy.ClusterOptions{Conn: cl.conn, Keyring: ring, Node: c.node, PresenceTTL: c.presenceTTL, Replicas: c.replicas, Prefix: c.prefix,
		AdvertiseURL: c.advertise}
	return cl, nil
}

// jetStreamReady asks for the account's JetStream information until it
// comes, for natsJetStreamReady at most; "not enabled" ends it at once.
func jetStreamReady(ctx context.Context, js jetstream.JetStream) error {
	ctx, cancel := context.WithTimeout(ctx, natsJetStreamReady)
	defer cancel()
	for {
		try, cancelTry := context.WithTimeout(ctx, 5*time.Second)
		_, err := js.AccountInfo(try)
		cancelTry()
		if err == nil || errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(natsReconnectWait):
		}
	}
}

// oauthKV is the OAuth state of a cluster's --public-url, in JetStream.
func (cl *cluster) oauthKV(ring *clusterseal.Keyring, prefix string, replicas int) (authserver.KV, error) {
	kv, err := jetstreamkv.New(cl.js, ring, prefix, replicas, nil)
	if err != nil {
		return nil, fmt.Errorf("the OAuth state in JetStream: %w", err)
	}
	return kv, nil
}

// Close closes the connection and stops the embedded server, after the
// proxy stopped using them.
func (cl *cluster) Close() {
	if cl.conn != nil {
		cl.conn.Close()
	}
	if cl.embedded != nil {
		cl.embedded.Shutdown()
	}
}

// hostNode is --node's default: the host name, in the characters a node
// name may hold.
func hostNode() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "node"
	}
	return sanitizeNode(h)
}

func sanitizeNode(h string) string {
	b := []byte(h)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			b[i] = '-'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	if len(b) == 0 {
		return "node"
	}
	return string(b)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// hasUser reports whether a NATS URL carries a user (and password).
func hasUser(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.User != nil
}

// redact hides a URL's password (nats://user:pass@host) in messages.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		u.User = url.User("REDACTED") // a user name alone may be a token
		return u.String()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "…@" + s[i+1:]
	}
	return s
}

func redactList(urls []string) string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = redact(u)
	}
	return strings.Join(out, ",")
}
