// Command browserbridge-proxy is the cloud relay of spec 001: it lets MCP
// clients reach their user's browsers from anywhere (see docs/relay.md).
//
//	browserbridge-proxy init [--dir DIR] [--force]
//	browserbridge-proxy serve --listen ADDR [--tls-cert F --tls-key F] --secret-file F [--revoked F] [limits]
//	    [--public-url URL [--oauth-state F] [--oauth-config F]]
//	    [--nats URLS|embedded --node NAME [NATS options]]
//	browserbridge-proxy invite --user U [--secret-file F] [--proxy URL]
//	browserbridge-proxy token --secret-file F --user U --kind extension|mcp [--ttl 720h] [--url URL]
//
// With --public-url it is also an MCP server over Streamable HTTP for
// clients that sign in with OAuth (docs/proxy-http.md). With --nats it is a
// node of a cluster of proxies over NATS (docs/proxy-cluster.md).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/clusterseal"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

var usage = fmt.Sprintf(`usage:
  browserbridge-proxy init [--dir DIR] [--force] [--public-url URL]
  browserbridge-proxy serve --listen ADDR [--tls-cert FILE --tls-key FILE] --secret-file FILE
      [--revoked FILE] [--invite-ttl %v] [--credential-ttl %v]
      [--max-conns-per-ip %d] [--max-mcp-per-user %d] [--max-extensions-per-user %d]
      [--idle-timeout %v] [--read-timeout %v] [--trusted-proxies CIDR,...]
      [--max-body-bytes-per-user N] [--max-body-bytes N]
      [--public-url https://proxy.example.com [--oauth-state FILE] [--oauth-config FILE]]
      [--nats nats://a:4222,nats://b:4222 [--nats-creds FILE] [--nats-ca FILE] [--nats-cert FILE --nats-key FILE]
       | --nats embedded [--nats-listen HOST:PORT] [--nats-store DIR] [--nats-routes URLS --nats-cluster-listen HOST:PORT]]
      [--node NAME] [--advertise-url http://NODE:8787] [--nats-replicas 1] [--nats-prefix browserbridge] [--presence-ttl %v]
      [--metrics-listen HOST:PORT]
  browserbridge-proxy invite --user USER [--secret-file FILE] [--proxy http://127.0.0.1:8787] [--url URL]
  browserbridge-proxy token --secret-file FILE --user USER --kind extension|mcp [--ttl 720h] [--url URL]
  browserbridge-proxy nats-user --secret-file FILE
  browserbridge-proxy version

init writes a new secret (0600) and prints the commands that follow. invite asks
the running proxy for a one-time enrolment code bound to a user (it works once,
for --invite-ttl); on that user's computer, `+"`browserbridge relay join URL --code CODE`"+`
exchanges it for the bridge's own credential, which `+"`browserbridge relay leave`"+`
revokes (kept in --revoked across restarts; a cluster keeps revocations in JetStream).
Enrolment needs https:// (TLS here or at a reverse proxy); plain http only on loopback.
--secret-file holds an HS256 secret (at least 32 bytes) or an Ed25519 key in PEM
(PRIVATE KEY to sign and verify; PUBLIC KEY lets serve verify only). During a
rotation it holds the new key first and the old after it (secrets separated by a
blank line, or PEM blocks one after the other); serve reads it again on SIGHUP.
The limits are described in docs/limits.md; 0 turns a cap off.
--public-url also serves MCP over Streamable HTTP with OAuth sign-in at
{public-url}/mcp (docs/proxy-http.md): people sign in with a pairing code from
`+"`browserbridge pair`"+`, or with --oauth-config's password or OIDC provider
(or the password in %s).
--nats makes this proxy a node of a cluster (docs/proxy-cluster.md): extensions and
clients connected to different nodes work together. NATS needs JetStream; the
nodes keep the OAuth state there (no --oauth-state). --nats embedded runs a NATS
server in this process. --node defaults to the host name. With --public-url, give
each node --advertise-url so that a session's requests reach the node that holds it.
A cluster's traffic and state on NATS are sealed with keys derived from --secret-file;
nats-user prints the NATS user and password derived from it, which --nats embedded
requires and which a node signs in to a NATS URL with (docs/proxy-cluster.md, "Trust").
`, proxy.DefaultEnrolCodeTTL, proxy.DefaultCredentialTTL, proxy.DefaultMaxConnsPerIP, proxy.DefaultMaxMCPPerUser, proxy.DefaultMaxExtensionsPerUser,
	proxy.DefaultIdleTimeout, proxy.DefaultReadTimeout, proxy.DefaultPresenceTTL, config.EnvOAuthPassword)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "browserbridge-proxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "init":
		return initProxy(args[1:], stdout, stderr)
	case "invite":
		return invite(ctx, args[1:], stdout, stderr)
	case "token":
		return mint(args[1:], stdout, stderr)
	case "nats-user":
		return natsUser(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "browserbridge-proxy", buildinfo.String())
		return nil
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8787", "address to listen on")
	cert := fs.String("tls-cert", "", "TLS certificate file (PEM); with --tls-key, serve wss://")
	key := fs.String("tls-key", "", "TLS key file (PEM)")
	secret := fs.String("secret-file", "", "token key file (required)")
	verbose := fs.Bool("v", false, "log connection events")
	perIP := fs.Int("max-conns-per-ip", proxy.DefaultMaxConnsPerIP,
		"connections open at once from one client address (IPv4, or IPv6 /64); more get HTTP 429; 0: no limit (behind a load balancer)")
	perUserMCP := fs.Int("max-mcp-per-user", proxy.DefaultMaxMCPPerUser, "authenticated MCP client connections of one user; 0: no limit")
	perUserExt := fs.Int("max-extensions-per-user", proxy.DefaultMaxExtensionsPerUser, "authenticated extension connections of one user; 0: no limit")
	idle := fs.Duration("idle-timeout", proxy.DefaultIdleTimeout, "how long an HTTP keep-alive connection may wait for its next request")
	readTimeout := fs.Duration("read-timeout", proxy.DefaultReadTimeout, "how long a client may take to send one request, headers and body (never cuts a WebSocket)")
	publicURL := fs.String("public-url", "", "the proxy's public URL (https://proxy.example.com): also serve MCP over Streamable HTTP there, with OAuth sign-in")
	oauthState := fs.String("oauth-state", "", "with --public-url: the file that keeps OAuth registrations, sign-ins and tokens across restarts (default: in memory)")
	bodyPerUser := fs.Int64("max-body-bytes-per-user", proxy.DefaultMaxBodyBytesPerUser, "with --public-url: bytes of one user's request bodies in flight at once; more wait up to 10 s, then get 429")
	bodyTotal := fs.Int64("max-body-bytes", proxy.DefaultMaxBodyBytes, "with --public-url: bytes of all request bodies in flight at once; more wait up to 10 s, then get 503")
	trusted := fs.String("trusted-proxies", "", "reverse proxies in front (Caddy, Traefik), comma-separated addresses or CIDR networks (10.0.0.0/8): for their requests the client is the X-Forwarded-For address they vouch for, and each client keeps its own per-address limits")
	oauthConfig := fs.String("oauth-config", "", "with --public-url: a JSON file with password_hash, oidc, users (sign-in subject to proxy user) and allowed_origins")
	revoked := fs.String("revoked", "", "the file that keeps the bridge credentials revoked by `browserbridge relay leave` across restarts (default: in memory; a cluster keeps them in JetStream)")
	inviteTTL := fs.Duration("invite-ttl", proxy.DefaultEnrolCodeTTL, "how long an enrolment code from `browserbridge-proxy invite` works")
	credentialTTL := fs.Duration("credential-ttl", proxy.DefaultCredentialTTL, "the lifetime of the credential a bridge gets for an enrolment code")
	metricsListen := fs.String("metrics-listen", "", "also serve /metrics and the whole /health (counts, cluster peers and their internal URLs) on this host:port, for the operator's private network; the public listener's /health says the status alone")
	var cf clusterFlags
	cf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected argument %q", fs.Arg(0))
	}
	if *secret == "" {
		return errors.New("serve: --secret-file is required")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-conns-per-ip", *perIP}, {"max-mcp-per-user", *perUserMCP}, {"max-extensions-per-user", *perUserExt}} {
		if f.v < 0 {
			return fmt.Errorf("serve: --%s %d must be 0 (no limit) or more", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"idle-timeout", *idle}, {"read-timeout", *readTimeout}, {"invite-ttl", *inviteTTL}, {"credential-ttl", *credentialTTL}} {
		if f.v <= 0 {
			return fmt.Errorf("serve: --%s %v must be positive", f.name, f.v)
		}
	}
	if (*cert == "") != (*key == "") {
		return errors.New("serve: --tls-cert and --tls-key go together")
	}
	if *bodyPerUser <= 0 || *bodyTotal <= 0 {
		return fmt.Errorf("serve: --max-body-bytes-per-user %d and --max-body-bytes %d must be positive", *bodyPerUser, *bodyTotal)
	}
	proxies, err := parseTrustedProxies(*trusted)
	if err != nil {
		return fmt.Errorf("serve: --trusted-proxies: %w", err)
	}
	if err := cf.validate(fs, *oauthState); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	keys, err := loadKeys(*secret)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	opts := proxy.Options{Keys: keys, Logger: log,
		MaxConnsPerIP: noLimit(*perIP), MaxMCPPerUser: noLimit(*perUserMCP), MaxExtensionsPerUser: noLimit(*perUserExt),
		IdleTimeout: *idle, ReadTimeout: *readTimeout, TrustedProxies: proxies,
		MaxBodyBytesPerUser: *bodyPerUser, MaxBodyBytes: *bodyTotal,
		Enrol: proxy.EnrolOptions{CodeTTL: *inviteTTL, CredentialTTL: *credentialTTL, RevokedFile: *revoked}}
	scheme := "ws"
	if *cert != "" {
		pair, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			return fmt.Errorf("loading the TLS certificate: %w", err)
		}
		// Run puts TLS above its per-address count of connections.
		opts.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
		scheme = "wss"
	}
	if *publicURL == "" && (*oauthState != "" || *oauthConfig != "") {
		return errors.New("serve: --oauth-state and --oauth-config go with --public-url")
	}
	var shared authserver.KV
	var ring *clusterseal.Keyring
	if cf.nats != "" && *revoked != "" {
		return errors.New("serve: --revoked does not go with --nats: a cluster keeps revoked credentials in JetStream, where every node reads them")
	}
	if cf.nats == "" && *revoked == "" {
		log.Warn("credentials revoked by `browserbridge relay leave` are kept in memory: a restart forgets them (--revoked FILE keeps them)")
	}
	if cf.nats != "" {
		secrets, err := keys.Secrets()
		if err != nil {
			return fmt.Errorf("serve: --nats with --secret-file %s: %w", *secret, err)
		}
		if ring, err = clusterseal.New(secrets); err != nil {
			return fmt.Errorf("serve: --secret-file %s: %w", *secret, err)
		}
		cl, err := cf.join(ctx, log, ring)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer cl.Close() // after Run: the proxy uses the connection until it stops
		opts.Cluster = cl.opts
		if *publicURL != "" {
			if shared, err = cl.oauthKV(ring, cf.prefix, cf.replicas); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
		}
	}
	if *publicURL != "" {
		ho, closeKV, err := httpOptions(*publicURL, *oauthState, *oauthConfig, shared, log)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer closeKV()
		opts.HTTP = ho
	}
	srv, err := proxy.New(opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	if *metricsListen != "" {
		mln, err := net.Listen("tcp", *metricsListen)
		if err != nil {
			ln.Close()
			return fmt.Errorf("--metrics-listen: %w", err)
		}
		ms := &http.Server{Handler: srv.InternalHandler(), ReadHeaderTimeout: 10 * time.Second}
		go ms.Serve(mln)
		defer ms.Close()
		log.Info("metrics and the whole health report", "metrics", "http://"+mln.Addr().String()+relaywire.PathMetrics,
			"health", "http://"+mln.Addr().String()+relaywire.PathHealth)
	}
	stopReload := reloadOnHangup(*secret, srv, ring, log)
	defer stopReload()
	// The base URL is what relay.url and `browserbridge connect --proxy`
	// take; each accepts its endpoint's URL as well.
	base := scheme + "://" + ln.Addr().String()
	if opts.Cluster != nil {
		log.Info("a node of a proxy cluster over NATS", "node", opts.Cluster.Node, "replicas", opts.Cluster.Replicas,
			"presence_ttl", opts.Cluster.PresenceTTL, "prefix", opts.Cluster.Prefix, "advertise_url", opts.Cluster.AdvertiseURL)
		if opts.HTTP != nil && opts.Cluster.AdvertiseURL == "" {
			log.Warn("no --advertise-url: a Streamable HTTP session's request that the load balancer sends to another node gets 404, and its client starts a new session")
		}
	}
	log.Info("browserbridge-proxy serving", "version", buildinfo.String(), "url", base+"/",
		"extensions", base+relaywire.PathExtension, "mcp", base+relaywire.PathMCP, "alg", keys.Alg(),
		"enrol", "http"+strings.TrimPrefix(base, "ws")+relaywire.PathEnrol)
	if opts.HTTP != nil {
		log.Info("MCP over Streamable HTTP, with OAuth sign-in", "mcp_http", opts.HTTP.PublicURL+"/mcp",
			"servers", opts.HTTP.PublicURL+"/servers/NAME/mcp", "password", opts.HTTP.Identity.PasswordHash != "" || opts.HTTP.Identity.Password != "",
			"oidc", opts.HTTP.Identity.OIDC != nil, "mapped_subjects", len(opts.HTTP.Users),
			"listen", ln.Addr().String(), "reach", listenReach(ln.Addr()))
	}
	if err := srv.Run(ctx, ln); err != nil {
		return err
	}
	log.Info("browserbridge-proxy stopped")
	return nil
}

// listenReach says who can reach the listener at addr, for the start-up
// log: written from the address actually bound, never assumed.
func listenReach(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return "loopback only: this machine's reverse proxy (TLS) carries the public traffic"
	}
	return "beyond loopback: OAuth authenticates every request; TLS (--tls-cert, or a reverse proxy) must carry it"
}

// loadKeys reads --secret-file: the token keys, the new one first during a
// rotation (token.Load).
func loadKeys(path string) (*token.Keys, error) {
	keys, err := token.Load(path)
	if err != nil {
		return nil, err
	}
	keys.Leeway = 30 * time.Second
	return keys, nil
}

// reloadOnHangup reads --secret-file again on SIGHUP, so that a rotation
// (docs/proxy-cluster.md, "Rotating the secret") needs no restart: the
// token keys and the cluster's keyring take the file's keys, the first
// signing and sealing, every one verifying and opening. A file that does
// not load leaves the keys as they were, with a log line saying why.
func reloadOnHangup(path string, srv *proxy.Server, ring *clusterseal.Keyring, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
			}
			keys, err := loadKeys(path)
			if err == nil && ring != nil {
				var secrets [][]byte
				if secrets, err = keys.Secrets(); err == nil {
					err = ring.Reload(secrets)
				}
			}
			if err != nil {
				log.Error("SIGHUP: --secret-file did not load; the keys stay as they were", "file", path, "err", err)
				continue
			}
			srv.SetKeys(keys)
			attrs := []any{"file", path, "alg", keys.Alg()}
			if ring != nil {
				attrs = append(attrs, "cluster_key_ids", ring.KeyIDs())
			}
			log.Info("SIGHUP: reloaded --secret-file; the first key signs and seals, every one verifies and opens", attrs...)
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// parseTrustedProxies reads --trusted-proxies: entries as the gateway's
// trusted_proxies takes them (config.ParseTrustedProxy).
func parseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		p, err := config.ParseTrustedProxy(e)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// noLimit maps a flag's 0 ("no limit") to proxy.Options' negative.
func noLimit(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// natsUser prints the NATS user and password derived from --secret-file's
// first key, as .env lines: what an external NATS server of the deployment
// is configured with (nats-server --user --pass), and what the nodes sign
// in with when given no other credentials.
func natsUser(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nats-user", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("secret-file", "", "token key file (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" {
		return errors.New("nats-user: --secret-file is required")
	}
	keys, err := token.Load(*secret)
	if err != nil {
		return err
	}
	secrets, err := keys.Secrets()
	if err != nil {
		return fmt.Errorf("nats-user: %w", err)
	}
	ring, err := clusterseal.New(secrets)
	if err != nil {
		return fmt.Errorf("nats-user: %w", err)
	}
	user, password := ring.NATSUser()
	fmt.Fprintf(stdout, "NATS_USER=%s\nNATS_PASSWORD=%s\n", user, password)
	return nil
}

func mint(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("secret-file", "", "token key file (required)")
	userID := fs.String("user", "", "the user the token is for (required)")
	kind := fs.String("kind", "", "extension or mcp (required)")
	ttl := fs.Duration("ttl", 720*time.Hour, "lifetime")
	url := fs.String("url", "", "the proxy's WebSocket URL, embedded for MCP clients (optional)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" || *userID == "" || *kind == "" {
		return errors.New("token: --secret-file, --user and --kind are required")
	}
	k, err := token.ParseKind(*kind)
	if err != nil {
		return err
	}
	keys, err := token.Load(*secret)
	if err != nil {
		return err
	}
	if *ttl <= 0 {
		return fmt.Errorf("token: --ttl %v must be positive", *ttl)
	}
	now := time.Now()
	tok, err := keys.Mint(token.Claims{Subject: *userID, Kind: k, IssuedAt: now.Unix(), Expires: now.Add(*ttl).Unix(), URL: *url})
	if err != nil {
		return fmt.Errorf("minting: %w", err)
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
