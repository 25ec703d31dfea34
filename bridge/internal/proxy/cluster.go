package proxy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// ClusterOptions join the proxy to a cluster of proxies over NATS
// (docs/relay.md, "Cluster"): an extension connected to one node and an MCP
// client connected to another work together as on one node. Nil
// Options.Cluster: one process, no NATS in the path.
type ClusterOptions struct {
	// Conn is a connection to the deployment's NATS, with JetStream. The
	// proxy uses it until Shutdown and does not close it. Required.
	Conn *nats.Conn
	// Keyring seals every message and bucket value the node puts on NATS
	// and opens what the others put there (clusterseal): keys derived from
	// the deployment's secret, which every node holds. Required.
	Keyring *clusterseal.Keyring
	// Node names this node, unique in the cluster ([A-Za-z0-9_-], at most
	// 64 characters). Required.
	Node string
	// PresenceTTL is how long a node that stopped heartbeating is still
	// taken for alive; its extensions are gone for the others after it.
	// Heartbeats go out every fifth of it. Default DefaultPresenceTTL.
	PresenceTTL time.Duration
	// Replicas is the JetStream replica count of the cluster's key-value
	// buckets (1 for one NATS server, 3 for a cluster of three). Default 1.
	Replicas int
	// Prefix begins every subject and bucket name of the cluster, so that
	// several deployments can share one NATS. Default "browserbridge".
	Prefix string
	// AdvertiseURL is where the other nodes reach this node's HTTP
	// listener (http://proxy-1:8787): a Streamable HTTP session lives on
	// the node that made it, and a request for it that a load balancer
	// sends elsewhere is passed there (cluster_http.go). Empty: such a
	// request is answered 404 and the client starts a new session.
	AdvertiseURL string
}

// DefaultPresenceTTL is ClusterOptions.PresenceTTL's default.
const DefaultPresenceTTL = 5 * time.Second

var validNodeName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (o *ClusterOptions) setDefaults() error {
	if o.Conn == nil {
		return errors.New("proxy: ClusterOptions.Conn is required")
	}
	if o.Keyring == nil {
		return errors.New("proxy: ClusterOptions.Keyring is required: the cluster's traffic is sealed with the deployment's secret")
	}
	if !validNodeName.MatchString(o.Node) {
		return fmt.Errorf("proxy: cluster node name %q must be 1 to 64 letters, digits, '-' or '_'", o.Node)
	}
	if o.PresenceTTL <= 0 {
		o.PresenceTTL = DefaultPresenceTTL
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Prefix == "" {
		o.Prefix = "browserbridge"
	}
	if o.AdvertiseURL != "" {
		u, err := url.Parse(o.AdvertiseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("proxy: cluster advertise URL %q must be http(s)://host:port", o.AdvertiseURL)
		}
		o.AdvertiseURL = strings.TrimSuffix(o.AdvertiseURL, "/")
	}
	if !validNodeName.MatchString(o.Prefix) {
		return fmt.Errorf("proxy: cluster prefix %q must be letters, digits, '-' or '_'", o.Prefix)
	}
	return nil
}

// The cluster (docs/relay.md, "Cluster"). Every node subscribes to one
// wildcard subject of its own, PREFIX.n.NODE.>, and learns the others'
// extensions from a JetStream key-value bucket (presence) and their
// liveness from another (nodes, heartbeats). An MCP client connecting to an
// extension of another node gets a remoteConn here (cluster_link.go) and a
// shadow mcpClient there, so that everything facing the extension (id
// mapping, in-flight checks, progress, cancellation, requests to clients,
// detaching) runs on the extension's node in the same code as for a local
// client. Subjects carry a keyed hash of the user (Keyring.UserKey), checked
// at both ends against the link's own user, so that a bug in id mapping
// cannot hand one user's traffic to another's connection.
//
// Trust (docs/proxy-cluster.md, "Trust"): every message and every bucket
// value is sealed (cluster_seal.go); what does not open is dropped and
// counted, so a NATS client without the deployment's secret can neither
// read nor forge anything of the cluster.

// clusterNode is the proxy's membership of a cluster.
type clusterNode struct {
	s    *Server
	opts ClusterOptions
	ring *clusterseal.Keyring
	nc   *nats.Conn
	js   jetstream.JetStream
	log  func(msg string, args ...any)

	inbox string // PREFIX.n.NODE.
	sub   *nats.Subscription

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	wake   chan struct{} // the presence writer has work
	down   atomic.Bool   // the NATS connection is down: no remote links
	links  atomic.Value  // string: nodeInfo.Links of this node

	mu       sync.Mutex
	kvP, kvN jetstream.KeyValue
	mirror   map[string]presenceEntry // presence bucket, by key
	byUser   map[string]map[string]struct{}
	peers    map[string]*peerState    // other nodes seen, by name
	own      map[string]presenceEntry // this node's extensions, by key
	claims   map[string]int           // id claims of this node (claimKey) → extensions holding it
	// The keys this node wrote its extensions' entries and claims under,
	// by user and id: a key holds a keyed hash under the sealing secret,
	// which a rotation (SIGHUP) changes while the extension lives, so the
	// key is remembered rather than computed again at the end.
	ownKeys   map[string]string      // userID \x00 extension id → presence key
	claimKeys map[string]string      // userID \x00 id → claim key
	dirty     map[string]struct{}    // keys to write (put if in own, else delete)
	remote    map[string]*remoteConn // this node's clients' links to other nodes, by connection id
	shadows   map[string]*mcpClient  // other nodes' clients of this node's extensions, by connection id
	epoch     time.Time              // when the current watch began
	// selfSeq counts this node's own heartbeats seen back through the
	// watch, selfSeen when the last came: a peer is taken for gone only
	// when this node's beats kept coming while the peer's did not, so a
	// slow bus (a busy machine, a NATS server lost) is not taken for
	// dead peers.
	selfSeq      uint64
	selfSeen     time.Time
	epochSelfSeq uint64 // selfSeq when the current watch began
	dropped      int    // messages NATS dropped on our subscription, seen so far

	httpTransport *http.Transport // to other nodes, for their sessions' requests
	endedStore    endedBucket     // session ends kept for browsers away (cluster_ended.go)
	keepBox       mailbox         // their keeps, one at a time (keepAway)

	m clusterMetrics
}

type peerState struct {
	info     nodeInfo
	lastSeen time.Time
	selfSeq  uint64 // this node's own beats seen by then (clusterNode.selfSeq)
	gone     bool   // deleted its key (a clean stop) or missed its heartbeats
}

// presenceEntry is one extension in the presence bucket.
type presenceEntry struct {
	User   string    `json:"user"`
	ID     string    `json:"id"`
	Name   string    `json:"name"`
	Kind   string    `json:"kind"`
	Server string    `json:"server,omitempty"`
	Node   string    `json:"node"`
	Since  time.Time `json:"since"`
	// Replace: a server extension that asked to take its server name
	// over (servername.go).
	Replace bool `json:"replace,omitempty"`
}

// nodeInfo is one node's heartbeat in the nodes bucket.
type nodeInfo struct {
	Node       string    `json:"node"`
	Started    time.Time `json:"started"`
	Extensions int64     `json:"extensions"`
	MCPClients int64     `json:"mcp_clients"`
	URL        string    `json:"url,omitempty"` // ClusterOptions.AdvertiseURL
	// Links changes whenever the node ends every cross-node connection of
	// its own accord (its NATS link dropped): the others then end theirs
	// with it, even if it came back before they missed a heartbeat.
	Links string `json:"links"`
}

type clusterMetrics struct {
	forwarded *metrics.CounterSeries
	callTime  *metrics.HistogramSeries
	dropped   *metrics.Counter
	ended     *metrics.Counter
	rejected  *metrics.Counter

	httpForwarded *metrics.CounterSeries
}

// presenceKey is an extension's key in the presence bucket. The user's
// and the extension's parts are keyed hashes: user ids are any string,
// keys are not, and neither a name nor a hash of one anyone can compute
// (an extension's id is one of its user and name) may show on the bus.
func (c *clusterNode) presenceKey(node, user, extID string) string {
	return node + "." + c.ring.UserKey(user) + "." + c.ring.NameKey(extID)
}

// startCluster joins the cluster: buckets, the node's subscription, the
// watch and heartbeat loop, the presence writer.
// opts has its defaults (New set them).
func (s *Server) startCluster(opts ClusterOptions) (*clusterNode, error) {
	js, err := jetstream.New(opts.Conn)
	if err != nil {
		return nil, fmt.Errorf("proxy: cluster: JetStream: %w", err)
	}
	c := &clusterNode{
		s: s, opts: opts, ring: opts.Keyring, nc: opts.Conn, js: js,
		log:    func(msg string, args ...any) { s.log.Info(msg, append(args, "node", opts.Node)...) },
		inbox:  opts.Prefix + ".n." + opts.Node + ".",
		wake:   make(chan struct{}, 1),
		mirror: make(map[string]presenceEntry),
		byUser: make(map[string]map[string]struct{}),
		peers:  make(map[string]*peerState),
		own:    make(map[string]presenceEntry),
		claims: make(map[string]int),

		ownKeys:   make(map[string]string),
		claimKeys: make(map[string]string),
		dirty:     make(map[string]struct{}),
		remote:    make(map[string]*remoteConn),
		shadows:   make(map[string]*mcpClient),

		httpTransport: newClusterTransport(),
	}
	r := s.opts.Metrics
	c.m.forwarded = r.NewCounter("browserbridge_proxy_cluster_forwarded_total", "Requests of this node's MCP clients forwarded to an extension on another node.").With()
	c.m.callTime = r.NewHistogram("browserbridge_proxy_cluster_call_seconds", "Time from forwarding a request to another node to its reply coming back.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}).With()
	c.m.dropped = r.NewCounter("browserbridge_proxy_cluster_dropped_total", "Cluster messages dropped, by reason.", "reason")
	c.m.httpForwarded = r.NewCounter("browserbridge_proxy_cluster_http_forwarded_total", "Streamable HTTP requests passed to the node that holds their session.").With()
	c.m.ended = r.NewCounter("browserbridge_proxy_cluster_links_ended_total", "Cross-node connections ended by the cluster (a node or NATS went away), by reason.", "reason")
	c.m.rejected = r.NewCounter("browserbridge_proxy_cluster_rejected_total", "Cluster messages and bucket values that did not open with the deployment's secret (forged, moved, replayed, stale, another deployment's), by what and why.", "what", "reason")
	c.watchRejections()
	r.NewGaugeFunc("browserbridge_proxy_cluster_peers", "Other nodes of the cluster alive now.", func() float64 { return float64(len(c.alivePeers())) })
	r.NewGaugeFunc("browserbridge_proxy_cluster_links", "Cross-node connections: this node's clients to other nodes' extensions (side client), other nodes' clients of this node's extensions (side extension).", func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return float64(len(c.remote) + len(c.shadows))
	})
	c.links.Store(rand.Text())
	ctx := context.Background()
	setup, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.openBuckets(setup); err != nil {
		return nil, err
	}
	// The first heartbeat is in the bucket before this node can claim an
	// extension's id: another node checks a claim's holder by its heartbeat
	// (claimID), and would take a node whose first beat was still on its
	// way for gone, and its claim with it.
	if err := c.heartbeat(setup); err != nil {
		return nil, fmt.Errorf("proxy: cluster: writing this node's first heartbeat: %w", err)
	}
	sub, err := c.nc.Subscribe(c.inbox+">", c.receive)
	if err != nil {
		return nil, fmt.Errorf("proxy: cluster: subscribing to %s>: %w", c.inbox, err)
	}
	// The handler never blocks (cluster_link.go): generous limits only
	// guard memory; what NATS drops past them ends the links (sweep).
	_ = sub.SetPendingLimits(1<<20, 256<<20)
	c.sub = sub
	if err := c.nc.FlushTimeout(10 * time.Second); err != nil {
		sub.Unsubscribe()
		return nil, fmt.Errorf("proxy: cluster: %w", err)
	}
	c.ctx, c.cancel = context.WithCancel(ctx)
	c.wg.Add(3)
	go c.watchLoop()
	go c.heartbeatLoop()
	go c.writeLoop()
	c.log("joined the proxy cluster", "subject", c.inbox+">", "presence_ttl", opts.PresenceTTL)
	return c, nil
}

// openBuckets creates (or finds) the cluster's buckets. Nodes starting
// together ask for the same replicated buckets at once, and NATS may then
// answer none of those requests (the bucket is made all the same): each
// attempt is short, and failed ones are tried again until ctx ends.
func (c *clusterNode) openBuckets(ctx context.Context) error {
	open := func(cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
		var err error
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
			attempt, cancel := context.WithTimeout(ctx, 3*time.Second)
			var kv jetstream.KeyValue
			kv, err = c.js.CreateOrUpdateKeyValue(attempt, cfg)
			cancel()
			if err == nil {
				return kv, nil
			}
			if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
				return nil, err // no second try will change that
			}
			select {
			case <-ctx.Done():
				return nil, err
			case <-time.After(wait):
			}
		}
	}
	kvP, err := open(jetstream.KeyValueConfig{
		Bucket: c.opts.Prefix + "_presence", Description: "Browser Bridge proxy: which node holds which extension",
		History: 1, Replicas: c.opts.Replicas, Storage: jetstream.MemoryStorage,
	})
	if err != nil {
		return fmt.Errorf("proxy: cluster: the presence bucket (JetStream must be enabled on this NATS, and %d replicas need at least as many NATS servers): %w", c.opts.Replicas, err)
	}
	kvN, err := open(jetstream.KeyValueConfig{
		Bucket: c.opts.Prefix + "_nodes", Description: "Browser Bridge proxy: the nodes' heartbeats",
		History: 1, Replicas: c.opts.Replicas, Storage: jetstream.MemoryStorage, TTL: c.opts.PresenceTTL,
	})
	if err != nil {
		return fmt.Errorf("proxy: cluster: the nodes bucket: %w", err)
	}
	c.mu.Lock()
	c.kvP, c.kvN = kvP, kvN
	c.mu.Unlock()
	return nil
}

// withdraw deletes the node's presence entries at the start of a
// shutdown, before its extensions are told to go: one that reconnects to
// another node at once must find its id free there. The node stays a peer
// (its heartbeat goes on) until stop, so that calls in flight across nodes
// can still be answered in the shutdown's grace.
func (c *clusterNode) withdraw() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c.deleteOwnKeys(ctx)
}

// deleteOwnKeys forgets this node's extensions and claims and deletes
// their entries, until NATS fails to answer (then the others time the
// node out).
func (c *clusterNode) deleteOwnKeys(ctx context.Context) {
	c.mu.Lock()
	kvP := c.kvP
	keys := c.ownKeysLocked()
	c.own = map[string]presenceEntry{}
	c.claims = map[string]int{}
	c.ownKeys = map[string]string{}
	c.claimKeys = map[string]string{}
	c.mu.Unlock()
	for _, k := range keys {
		if kvP.Delete(ctx, k) != nil {
			break
		}
	}
}

// ownKeysLocked returns every presence key of this node: its extensions'
// (they may have left just now, their deletes not written yet) and any the
// mirror shows. c.mu is held.
func (c *clusterNode) ownKeysLocked() []string {
	keySet := make(map[string]struct{}, len(c.own)+len(c.dirty))
	for k := range c.own {
		keySet[k] = struct{}{}
	}
	for k := range c.dirty {
		keySet[k] = struct{}{}
	}
	for k := range c.claims {
		keySet[k] = struct{}{}
	}
	for k, e := range c.mirror {
		if e.Node == c.opts.Node {
			keySet[k] = struct{}{}
		}
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	return keys
}

// stop leaves the cluster: the node's presence and heartbeat are deleted,
// so that the others see it gone at once, not after the TTL.
func (c *clusterNode) stop() {
	c.cancel()
	c.wg.Wait()
	if c.sub != nil {
		c.sub.Unsubscribe()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c.deleteOwnKeys(ctx)
	c.mu.Lock()
	kvN := c.kvN
	c.mu.Unlock()
	_ = kvN.Delete(ctx, c.opts.Node)
	c.failLinks("the proxy node is shutting down", "shutdown")
	c.httpTransport.CloseIdleConnections()
}

// extensionUp and extensionDown record this node's extensions in the
// presence bucket (by the writer, never blocking the caller).
func (c *clusterNode) extensionUp(e *extension) {
	k := c.presenceKey(c.opts.Node, e.user.id, e.id)
	c.mu.Lock()
	c.ownKeys[e.user.id+"\x00"+e.id] = k
	c.own[k] = presenceEntry{User: e.user.id, ID: e.id, Name: e.name, Kind: e.kind, Server: e.server, Node: c.opts.Node, Since: e.since, Replace: e.replace}
	c.dirty[k] = struct{}{}
	c.mu.Unlock()
	c.kick()
}

func (c *clusterNode) extensionDown(e *extension) {
	c.mu.Lock()
	k, ok := c.ownKeys[e.user.id+"\x00"+e.id]
	if !ok {
		k = c.presenceKey(c.opts.Node, e.user.id, e.id)
	}
	delete(c.ownKeys, e.user.id+"\x00"+e.id)
	delete(c.own, k)
	c.dirty[k] = struct{}{}
	c.mu.Unlock()
	if e.claimed != "" {
		c.releaseClaim(e.user.id, e.claimed)
	}
	c.kick()
}

// releaseClaim gives up one hold of this node on the user's id claim; the
// writer deletes the claim when none is left.
func (c *clusterNode) releaseClaim(user, id string) {
	c.mu.Lock()
	ck, ok := c.claimKeys[user+"\x00"+id]
	if !ok {
		ck = c.claimKey(user, id)
	}
	if n := c.claims[ck]; n > 1 {
		c.claims[ck] = n - 1
	} else if n == 1 {
		delete(c.claims, ck)
		delete(c.claimKeys, user+"\x00"+id)
		c.dirty[ck] = struct{}{}
	}
	c.mu.Unlock()
	c.kick()
}

// Id claims. An extension's id is stable (stableID of its user and name)
// so that clients find it again after it reconnects, to any node. Two of
// one name at once on two nodes (a person's two machines) must not both
// take it: the id is claimed in the presence bucket with Create, which
// only one node can win, under claimPrefix+USERKEY.IDKEY (keyed hashes),
// holding the node's name, sealed. A claim of a node that is gone is taken over.

const claimPrefix = "id."

// claimTimeout bounds claiming an id; past it the stable id is taken as
// when NATS is away.
const claimTimeout = 10 * time.Second

// claimKey is the key of the user's claim on an id. During a rotation
// (docs/proxy-cluster.md) nodes sealing with different secrets hash the
// user differently and so claim under different keys: two browsers of one
// name that connect to two such nodes in that moment may share the id
// until one reconnects, as when NATS is away.
func (c *clusterNode) claimKey(user, id string) string {
	return claimPrefix + c.ring.UserKey(user) + "." + c.ring.NameKey(id)
}

// claimID returns stable if this node could claim it (or NATS did not
// answer: then it is the best guess), else a random id.
func (c *clusterNode) claimID(user, stable string) string {
	c.mu.Lock()
	k, held := c.claimKeys[user+"\x00"+stable]
	if !held {
		k = c.claimKey(user, stable)
	}
	kv, kvN := c.kvP, c.kvN
	if c.claims[k] > 0 { // held here already: a second of the name on this node
		c.mu.Unlock()
		return stable // the node's own check gives it another
	}
	c.mu.Unlock()
	mine := c.sealValue(kv, k, []byte(c.opts.Node))
	// NATS that is away fails at once (no reconnect buffer); the timeout is
	// for NATS that is slow (a busy machine), which must still decide.
	ctx, cancel := context.WithTimeout(context.Background(), claimTimeout)
	defer cancel()
	won := false
	_, err := kv.Create(ctx, k, mine)
	switch {
	case err == nil:
		won = true
	case errors.Is(err, jetstream.ErrKeyExists):
		entry, gerr := kv.Get(ctx, k)
		if gerr != nil {
			won = errors.Is(gerr, jetstream.ErrKeyNotFound) // released a moment ago
			if won {
				_, err = kv.Create(ctx, k, mine)
				won = err == nil
			}
			break
		}
		// A claim that does not open (forged, or written back) holds
		// nothing: it is taken over as a gone node's is.
		holder, ok := c.openValue("claim", entry)
		// Gone only if its heartbeat is gone from the bucket (whose TTL
		// is the presence TTL): this node may not have seen a node
		// that started a moment ago beat yet.
		gone := !ok
		if ok && string(holder) != c.opts.Node {
			hb, herr := kvN.Get(ctx, string(holder))
			if herr == nil {
				_, alive := c.openValue("heartbeat", hb)
				gone = !alive
			} else {
				gone = errors.Is(herr, jetstream.ErrKeyNotFound)
			}
		}
		if string(holder) == c.opts.Node || gone {
			_, err = kv.Update(ctx, k, mine, entry.Revision())
			won = err == nil
		}
	default:
		won = true // NATS is away: nothing to claim against
	}
	if !won {
		return newID(relaywire.PrefixExtension)
	}
	c.mu.Lock()
	c.claims[k]++
	c.claimKeys[user+"\x00"+stable] = k
	c.mu.Unlock()
	return stable
}

func (c *clusterNode) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeLoop writes the dirty presence keys: puts for this node's
// extensions, deletes for those gone (and for stale entries of dead nodes).
// A failed write is retried; later changes of a key supersede it.
func (c *clusterNode) writeLoop() {
	defer c.wg.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.wake:
		case <-retry.C:
		}
		c.mu.Lock()
		kv := c.kvP
		batch := make(map[string][]byte, len(c.dirty))
		for k := range c.dirty {
			if e, ok := c.own[k]; ok {
				b, _ := json.Marshal(e)
				batch[k] = b
			} else if c.claims[k] > 0 {
				batch[k] = []byte(c.opts.Node)
			} else {
				batch[k] = nil
			}
		}
		clear(c.dirty)
		c.mu.Unlock()
		for k, b := range batch {
			if b != nil {
				batch[k] = c.sealValue(kv, k, b)
			}
		}
		failed := false
		for k, b := range batch {
			ctx, cancel := context.WithTimeout(c.ctx, 2*time.Second)
			var err error
			if b != nil {
				_, err = kv.Put(ctx, k, b)
			} else {
				err = kv.Delete(ctx, k)
			}
			cancel()
			if err != nil {
				failed = true
				c.mu.Lock()
				c.dirty[k] = struct{}{}
				c.mu.Unlock()
			}
		}
		if failed {
			retry.Reset(250 * time.Millisecond)
		}
	}
}

// watchLoop keeps the mirror of the buckets, one watch per connection to
// NATS: after a reconnection (NATS may have restarted
// and lost its memory-stored buckets) the buckets are opened again, this
// node's entries written again, and the mirror rebuilt from what the new
// watch delivers.
func (c *clusterNode) watchLoop() {
	defer c.wg.Done()
	status := c.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer c.nc.RemoveStatusListener(status)
	for c.ctx.Err() == nil {
		if err := c.watchOnce(status); err != nil && c.ctx.Err() == nil {
			c.s.log.Warn("proxy cluster: watching the cluster's buckets", "node", c.opts.Node, "err", err)
			select {
			case <-c.ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
}

func (c *clusterNode) watchOnce(status chan nats.Status) error {
	if st := c.nc.Status(); st != nats.CONNECTED {
		c.linkDown()
		for st != nats.CONNECTED {
			var ok bool
			select {
			case <-c.ctx.Done():
				return nil
			case st, ok = <-status:
				if !ok || st == nats.CLOSED {
					return errors.New("the NATS connection was closed")
				}
			}
		}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	setup, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := c.openBuckets(setup); err != nil {
		return err
	}
	c.mu.Lock()
	kvP, kvN := c.kvP, c.kvN
	clear(c.mirror)
	clear(c.byUser)
	for k := range c.own {
		c.dirty[k] = struct{}{}
	}
	for k := range c.claims {
		c.dirty[k] = struct{}{}
	}
	c.epoch = time.Now()
	c.selfSeen = c.epoch
	c.epochSelfSeq = c.selfSeq
	c.mu.Unlock()
	c.down.Store(false)
	c.kick()
	c.heartbeat(setup)
	wP, err := kvP.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watching presence: %w", err)
	}
	defer wP.Stop()
	wN, err := kvN.WatchAll(ctx)
	if err != nil {
		return fmt.Errorf("watching nodes: %w", err)
	}
	defer wN.Stop()
	tick := time.NewTicker(c.opts.PresenceTTL / 5)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return nil
		case st, ok := <-status:
			if !ok {
				return errors.New("the NATS connection was closed")
			}
			if st != nats.CONNECTED {
				c.linkDown()
				return nil // the next round waits for the reconnection
			}
		case u, ok := <-wP.Updates():
			if !ok {
				return errors.New("the presence watch ended")
			}
			if u != nil {
				c.presenceUpdate(u)
			}
		case u, ok := <-wN.Updates():
			if !ok {
				return errors.New("the nodes watch ended")
			}
			if u != nil {
				c.nodeUpdate(u)
			}
		case <-tick.C:
			if !c.sweep() {
				return errors.New("this node's own heartbeats stopped coming back through the watch; watching again")
			}
		}
	}
}

// heartbeatLoop writes the node's heartbeat every fifth of the TTL, on
// its own goroutine: a slow write must not hold the watch.
func (c *clusterNode) heartbeatLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.opts.PresenceTTL / 5)
	defer tick.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-tick.C:
			if c.down.Load() {
				continue
			}
			ctx, cancel := context.WithTimeout(c.ctx, c.opts.PresenceTTL/2)
			c.heartbeat(ctx)
			cancel()
		}
	}
}

func (c *clusterNode) heartbeat(ctx context.Context) error {
	c.mu.Lock()
	kv := c.kvN
	c.mu.Unlock()
	b, _ := json.Marshal(nodeInfo{Node: c.opts.Node, Started: c.s.started, Extensions: c.s.nExt.Load(), MCPClients: c.s.nMCP.Load(), URL: c.opts.AdvertiseURL, Links: c.links.Load().(string)})
	_, err := kv.Put(ctx, c.opts.Node, c.sealValue(kv, c.opts.Node, b))
	if err != nil && (c.ctx == nil || c.ctx.Err() == nil) {
		c.s.log.Debug("proxy cluster: heartbeat", "node", c.opts.Node, "err", err)
	}
	return err
}

// linkDown: NATS is unreachable. Every cross-node connection ends now, on
// both sides, with a clear error: nothing could reach the other node, and
// nothing sent meanwhile would be delivered.
func (c *clusterNode) linkDown() {
	if c.down.Swap(true) {
		return
	}
	c.s.log.Warn("proxy cluster: NATS unreachable; cross-node connections end until it is back", "node", c.opts.Node)
	c.links.Store(rand.Text())
	c.mu.Lock()
	for _, p := range c.peers {
		p.gone = true
	}
	c.mu.Unlock()
	c.failLinks("the proxy cluster's message bus (NATS) is unreachable", "nats_down")
}

// presenceUpdate applies a change of the presence bucket to the mirror.
func (c *clusterNode) presenceUpdate(u jetstream.KeyValueEntry) {
	key := u.Key()
	if strings.HasPrefix(key, claimPrefix) {
		return // an id claim (claimID), not an extension
	}
	var e presenceEntry
	opened := false
	if u.Operation() == jetstream.KeyValuePut {
		v, ok := c.openValue("presence", u)
		// An entry that does not open is nobody's: it is left out of
		// the mirror as a deleted one is (and one of this node's keys
		// is written again below).
		opened = ok && json.Unmarshal(v, &e) == nil && e.User != "" && e.ID != ""
	}
	c.mu.Lock()
	old, had := c.mirror[key]
	if had {
		if set := c.byUser[old.User]; set != nil {
			delete(set, key)
			if len(set) == 0 {
				delete(c.byUser, old.User)
			}
		}
		delete(c.mirror, key)
	}
	arrived := false
	if opened {
		c.mirror[key] = e
		set := c.byUser[e.User]
		if set == nil {
			set = make(map[string]struct{})
			c.byUser[e.User] = set
		}
		set[key] = struct{}{}
		arrived = !had && e.Node != c.opts.Node && e.Kind == "browser"
		if _, mine := c.own[key]; e.Node == c.opts.Node && !mine {
			// Left by an earlier run of this node (it was killed): gone.
			c.dirty[key] = struct{}{}
			defer c.kick()
		}
	} else if _, mine := c.own[key]; mine {
		// Another node took this node for dead and deleted its entry:
		// it is alive, so the entry goes back.
		c.dirty[key] = struct{}{}
		defer c.kick()
	}
	c.mu.Unlock()
	if arrived && c.s.http != nil {
		c.s.http.browserArrived(e.User)
	}
	if opened && e.Kind == relaywire.ExtensionKindServer && e.Node != c.opts.Node {
		// Another node's registration of a server name, perhaps one
		// that this node's registrations of it must yield to.
		c.s.settleServerName(e.User, e.Server)
	}
}

func (c *clusterNode) nodeUpdate(u jetstream.KeyValueEntry) {
	name := u.Key()
	if name == c.opts.Node {
		if u.Operation() != jetstream.KeyValuePut {
			return
		}
		if _, ok := c.openValue("heartbeat", u); ok {
			c.mu.Lock()
			c.selfSeq++
			c.selfSeen = time.Now()
			c.mu.Unlock()
		}
		return
	}
	var info nodeInfo
	put := u.Operation() == jetstream.KeyValuePut
	if put {
		// A heartbeat that does not open (or names another node) says
		// nothing of the node, not even that it stopped: ignored.
		v, ok := c.openValue("heartbeat", u)
		if !ok || json.Unmarshal(v, &info) != nil || info.Node != name {
			return
		}
	}
	c.mu.Lock()
	p := c.peers[name]
	if p == nil {
		p = &peerState{}
		c.peers[name] = p
	}
	if put {
		wasGone, fresh := p.gone, p.lastSeen.IsZero()
		reset := p.info.Links != "" && info.Links != p.info.Links
		p.info, p.lastSeen, p.selfSeq, p.gone = info, time.Now(), c.selfSeq, false
		c.mu.Unlock()
		if wasGone {
			c.log("proxy cluster: node is back", "peer", name)
		}
		if wasGone || fresh {
			// Its registrations count from now on (aliveLocked).
			c.settleServerNamesOf(name)
		}
		if reset && !wasGone {
			// It ended its cross-node connections (its NATS link
			// dropped a moment) without missing a heartbeat.
			c.nodeGone(name, "ended its cross-node connections")
		}
		return
	}
	// Deleted: the node stopped cleanly.
	gone := !p.gone
	p.gone = true
	c.mu.Unlock()
	if gone {
		c.nodeGone(name, "stopped")
	}
}

// sweep declares nodes that missed their heartbeats for the TTL gone
// (while this node's own kept coming back: beatsForDeath of them), deletes
// presence entries left by nodes that are gone, and ends the links if NATS
// dropped messages of ours (they cannot be told apart). False when this
// node's own heartbeats have not come back for three TTLs: the watch is
// stuck and must start again.
func (c *clusterNode) sweep() bool {
	now := time.Now()
	ttl := c.opts.PresenceTTL
	var dead []string
	c.mu.Lock()
	for name, p := range c.peers {
		if !p.gone && now.Sub(p.lastSeen) > ttl && c.selfSeq-p.selfSeq >= beatsForDeath {
			p.gone = true
			dead = append(dead, name)
		}
		if p.gone && now.Sub(p.lastSeen) > 10*ttl {
			delete(c.peers, name)
		}
	}
	stuck := !c.down.Load() && now.Sub(c.selfSeen) > 3*ttl
	stale := 0
	// Entries of a node never seen are left until this node has seen its
	// own beats for a whole TTL: the other's may be on their way.
	settled := c.selfSeq-c.epochSelfSeq >= beatsForDeath
	for k, e := range c.mirror {
		if _, mine := c.own[k]; mine {
			continue
		}
		p := c.peers[e.Node]
		if (e.Node == c.opts.Node && settled) || (p != nil && p.gone) || (p == nil && e.Node != c.opts.Node && settled) {
			c.dirty[k] = struct{}{} // not in own: the writer deletes it
			stale++
		}
	}
	c.mu.Unlock()
	if stale > 0 {
		c.kick()
	}
	for _, name := range dead {
		c.nodeGone(name, fmt.Sprintf("missed its heartbeats for %v", ttl))
	}
	if c.sub != nil {
		if n, err := c.sub.Dropped(); err == nil && n > c.dropped {
			c.dropped = n
			c.m.dropped.With("slow_consumer").Inc()
			c.failLinks("the proxy cluster lost messages (this node could not keep up)", "slow_consumer")
		}
	}
	return !stuck
}

// settleServerNamesOf settles the server names that node's server
// extensions registered (Server.settleServerName): they count only while
// the node is alive, so a node seen alive again, or for the first time,
// may hold names that this node's registrations must yield.
func (c *clusterNode) settleServerNamesOf(node string) {
	type name struct{ user, server string }
	var names []name
	c.mu.Lock()
	for _, e := range c.mirror {
		if e.Node == node && e.Kind == relaywire.ExtensionKindServer {
			names = append(names, name{e.User, e.Server})
		}
	}
	c.mu.Unlock()
	for _, n := range names {
		c.s.settleServerName(n.user, n.server)
	}
}

// beatsForDeath is how many of its own heartbeats a node must see come
// back, after a peer's last, before it takes the peer for gone (with the
// TTL passed too): five, one TTL's worth.
const beatsForDeath = 5

// aliveLocked reports whether node is this one or a peer alive now.
func (c *clusterNode) aliveLocked(node string) bool {
	if node == c.opts.Node {
		return true
	}
	p := c.peers[node]
	return p != nil && !p.gone && !c.down.Load()
}

func (c *clusterNode) alivePeers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.peers {
		if c.aliveLocked(name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// remoteExtensions returns the user's extensions held by other live nodes,
// as stand-ins (extension.node set: never sent to), of one kind ("" for
// all), leaving out ids in skip (the local ones).
func (c *clusterNode) remoteExtensions(user, kind string, skip func(id string) bool) []*extension {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*extension
	seen := map[string]bool{}
	for k := range c.byUser[user] {
		e := c.mirror[k]
		if e.Node == c.opts.Node || !c.aliveLocked(e.Node) || (kind != "" && e.Kind != kind) || skip(e.ID) || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		out = append(out, &extension{s: c.s, id: e.ID, name: e.Name, kind: e.Kind, server: e.Server, since: e.Since, node: e.Node, replace: e.Replace})
	}
	return out
}

// lookup finds the user's extension extID on another live node.
func (c *clusterNode) lookup(user, extID string) (presenceEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var found presenceEntry
	ok := false
	for k := range c.byUser[user] {
		e := c.mirror[k]
		if e.ID == extID && e.Node != c.opts.Node && c.aliveLocked(e.Node) && (!ok || e.Since.After(found.Since)) {
			found, ok = e, true
		}
	}
	return found, ok
}

// nodeGone ends the links with a node that went away: this node's clients
// connected to its extensions get their calls in flight answered and
// `disconnected`; its clients' connections to this node's extensions end.
func (c *clusterNode) nodeGone(name, why string) {
	c.log("proxy cluster: node gone", "peer", name, "why", why)
	rcs, shadows := c.linksWith(name)
	c.endLinks(rcs, shadows, "the proxy node that holds the extension went away before it answered", "node_gone")
}

// linksWith returns the cross-node connections with node ("" for every
// node): this node's clients' to its extensions, and its clients' shadows
// here.
func (c *clusterNode) linksWith(node string) ([]*remoteConn, []*mcpClient) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rcs []*remoteConn
	for _, rc := range c.remote {
		if node == "" || rc.node == node {
			rcs = append(rcs, rc)
		}
	}
	var shadows []*mcpClient
	for _, sh := range c.shadows {
		if node == "" || sh.link.node == node {
			shadows = append(shadows, sh)
		}
	}
	return rcs, shadows
}

// endLinks ends cross-node connections, each on its own goroutine: telling
// a client or an extension may wait for room in its queue, and the watch
// loop that calls this must not.
func (c *clusterNode) endLinks(rcs []*remoteConn, shadows []*mcpClient, msg, reason string) {
	c.m.ended.With(reason).Add(float64(len(rcs) + len(shadows)))
	var wg sync.WaitGroup
	for _, rc := range rcs {
		wg.Add(1)
		go func() { defer wg.Done(); rc.fail(msg, relaywire.ReasonExtensionGone) }()
	}
	for _, sh := range shadows {
		wg.Add(1)
		go func() { defer wg.Done(); c.dropShadow(sh) }()
	}
	if c.ctx.Err() != nil {
		wg.Wait() // stopping: done before the NATS connection is closed
	}
}

// failLinks ends every cross-node connection of this node.
func (c *clusterNode) failLinks(msg, reason string) {
	rcs, shadows := c.linksWith("")
	c.endLinks(rcs, shadows, msg+"; the call's result is unknown", reason)
}

// health is the cluster's part of /health.
func (c *clusterNode) health() map[string]any {
	c.mu.Lock()
	peers := []map[string]any{}
	names := make([]string, 0, len(c.peers))
	for name := range c.peers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := c.peers[name]
		peers = append(peers, map[string]any{
			"node": name, "alive": c.aliveLocked(name), "last_seen_ms": time.Since(p.lastSeen).Milliseconds(),
			"extensions": p.info.Extensions, "mcp_clients": p.info.MCPClients, "url": p.info.URL,
		})
	}
	out, in := len(c.remote), len(c.shadows)
	c.mu.Unlock()
	return map[string]any{
		"peers": peers,
		"nats":  strings.ToLower(c.nc.Status().String()),
		// remote: this node's clients connected to other nodes'
		// extensions (out), other nodes' clients connected to this
		// node's extensions (in).
		"remote_pairs": map[string]int{"out": out, "in": in},
	}
}
