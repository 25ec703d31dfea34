// Package config reads the bridge's config file: JSON, decoded strictly
// (an unknown key is an error, not a silent no-op), then validated, with
// every message naming the key at fault.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// EnvToken sets the bearer token, overriding the config's "token".
const EnvToken = "BROWSERBRIDGE_TOKEN"

// EnvTrustedProxies sets "trusted_proxies" (comma-separated), overriding
// the config's: a container image or compose file knows its proxy's
// network better than the config file does.
const EnvTrustedProxies = "BROWSERBRIDGE_TRUSTED_PROXIES"

// DefaultListen is where the bridge serves MCP clients unless told otherwise.
const DefaultListen = "127.0.0.1:3456"

// Rate limit defaults (docs/limits.md). Beyond loopback, 1000 requests/s per
// peer: a fast agent's back-to-back calls take 3-6 ms each, so a lower
// default would refuse normal use. On loopback, every local client together
// may make 20 times that: one Go SDK session alone calls a no-op tool
// 1,500-2,000 times a second, and several agents share the budget, so the
// limit only stops a runaway loop; a request over either limit waits up to
// a second for its turn before it is refused.
const (
	DefaultRateLimit         = 1000.0
	DefaultLoopbackRateLimit = 20000.0
	DefaultRateWait          = time.Second
)

// DefaultHostPrefix is the gateway's host_prefix unless told otherwise.
const DefaultHostPrefix = "mcp"

// Config is the bridge's configuration. Every field is optional; Defaults
// fills in what is missing.
type Config struct {
	// Listen is the HTTP address for MCP clients; "" means DefaultListen.
	Listen string `json:"listen,omitempty"`
	// Socket is the Unix socket hosts connect to; "" means the per-user
	// default (paths.Socket).
	Socket string `json:"socket,omitempty"`
	// AllowedExtensions are extra extension ids whose hosts the bridge
	// accepts besides the bundled extension's (for development builds).
	AllowedExtensions []string `json:"allowed_extensions,omitempty"`
	// Log configures the bridge's rotating log file.
	Log Log `json:"log"`

	// Token, if set, is required from MCP clients as "Authorization:
	// Bearer <token>"; BROWSERBRIDGE_TOKEN overrides it. It is mandatory
	// when Listen is not a loopback address.
	Token string `json:"token,omitempty"`
	// AllowedOrigins are the web origins (scheme://host[:port]) that may
	// call the endpoints from a browser page; others get 403.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// AllowedHosts are extra Host header values accepted besides the
	// listen address and localhost (DNS-rebinding protection).
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// TrustedProxies are the addresses ("127.0.0.1", "::1") and networks
	// ("172.16.0.0/12") of the reverse proxies in front (Caddy, Traefik):
	// a request from one of them counts under the client's address, the
	// right-most X-Forwarded-For address that is not itself a trusted
	// proxy, for the rate limits, the per-client session caps and the
	// sign-in's per-address limits. Any other peer's X-Forwarded-For is
	// ignored. Empty (the default) trusts no one. BROWSERBRIDGE_TRUSTED_PROXIES
	// (comma-separated) overrides it.
	TrustedProxies []string `json:"trusted_proxies,omitempty"`
	// RateLimit is the requests per second of each peer beyond loopback
	// (an IP address, an IPv6 /64; with the token, per token too); unset
	// means DefaultRateLimit, 0 no limit. Headers the client writes, such as
	// Mcp-Session-Id, never name a bucket (docs/limits.md).
	RateLimit *float64 `json:"rate_limit,omitempty"`
	// RateBurst is the burst allowed above RateLimit; 0 means 2 x RateLimit.
	RateBurst int `json:"rate_burst,omitempty"`
	// LoopbackRateLimit is the requests per second of every loopback client
	// together (they share one bucket, and a burst of twice as many); unset
	// means DefaultLoopbackRateLimit, high enough that only a runaway loop
	// reaches it; 0 means no limit.
	LoopbackRateLimit *float64 `json:"loopback_rate_limit,omitempty"`
	// RateWait is how long a request over a rate limit is held for its
	// turn before it is refused with 429, as a Go duration; "" means
	// DefaultRateWait, "0s" refuses at once. A client that sends requests
	// back to back is then slowed, never refused.
	RateWait string `json:"rate_wait,omitempty"`
	// MaxBodyBytes bounds a request body; 0 means 4 MiB.
	MaxBodyBytes int64 `json:"max_body_bytes,omitempty"`
	// BrowserWait is how long a call waits for a browser to (re)connect,
	// as a Go duration ("30s"); "" means 45s (a service worker that Chrome
	// stopped comes back within the extension's 30 s alarm period).
	BrowserWait string `json:"browser_wait,omitempty"`
	// SessionTimeout reaps MCP sessions idle this long; "" means 30m.
	SessionTimeout string `json:"session_timeout,omitempty"`
	// MaxSessions bounds the live MCP sessions of every endpoint together
	// (Streamable HTTP, legacy SSE, the gateway's routes); 0 means 512,
	// -1 no bound (docs/limits.md).
	MaxSessions int `json:"max_sessions,omitempty"`
	// MaxSessionsPerClient bounds one client's sessions (peer address and
	// clientInfo.name); 0 means 64, -1 no bound. At a cap the client's own
	// least recently used idle session is ended first.
	MaxSessionsPerClient int `json:"max_sessions_per_client,omitempty"`
	// SSEPingInterval is the legacy SSE keep-alive period; "" means 30s,
	// "0s" turns pings off.
	SSEPingInterval string `json:"sse_ping_interval,omitempty"`
	// SSEPing is "event" (event: ping, spec 004) or "comment"; "" means event.
	SSEPing string `json:"sse_ping,omitempty"`
	// Relay connects the bridge's browsers to a cloud proxy (spec 001).
	Relay Relay `json:"relay,omitzero"`

	// MCPServers is the stdio MCP servers of the gateway, as Claude
	// Desktop writes them: {"name": {"command": ..., "args": [...],
	// "env": {...}}}. Validate decodes it strictly (stdio.DecodeServers,
	// so errors read "mcpServers.memory.comand: unknown key"); Servers
	// returns it. Absent, null and {} all mean no servers. It may not
	// hold servers when Gateway.ServersFile is set.
	MCPServers json.RawMessage `json:"mcpServers,omitempty"`
	// Gateway configures the stdio-server gateway.
	Gateway Gateway `json:"gateway,omitzero"`
	// OAuth says how people sign in to a public gateway
	// (gateway.public_url): see oauth.go.
	OAuth OAuth `json:"oauth,omitzero"`

	// Path is the file the config was read from: set by Load (also to the
	// default file when it does not exist), "" after Decode. Relative
	// paths in the config are resolved against its directory.
	Path string `json:"-"`
}

// Gateway configures the gateway to local stdio MCP servers. Every field
// is optional; Defaults fills in HostPrefix and Watch.
type Gateway struct {
	// ServersFile, if set, is a claude_desktop_config.json-style file,
	// {"mcpServers": {...}} and nothing else, holding the servers instead
	// of the config's own "mcpServers". A relative path is relative to the
	// config file's directory (see Config.ServersFile).
	ServersFile string `json:"servers_file,omitempty"`
	// HostPrefix: with HostDomain set, a server is also reached at
	// {name}.{HostPrefix}.{HostDomain}. "" means DefaultHostPrefix ("mcp").
	// A DNS name: dot-separated labels of lowercase letters, digits and
	// hyphens.
	HostPrefix string `json:"host_prefix,omitempty"`
	// HostDomain turns host-based routing on; "" (the default) leaves it
	// off (servers are reached by path only). A DNS name like HostPrefix.
	HostDomain string `json:"host_domain,omitempty"`
	// Watch reloads the servers when their file changes (by polling it);
	// unset means true. See WatchEnabled.
	Watch *bool `json:"watch,omitempty"`
	// MaxChildren bounds the processes (one per session) of each
	// per_session server whose entry sets no max_children; 0 means 8.
	MaxChildren int `json:"max_children,omitempty"`
	// AggregateTimeout is how long /servers/all/mcp waits for each
	// server's tool list before listing without it, as a Go duration;
	// "" means 2s. See AggregateWait.
	AggregateTimeout string `json:"aggregate_timeout,omitempty"`
	// PublicURL, if set, is the gateway's public base URL
	// (https://mcp.example.com, behind a TLS proxy): `browserbridge
	// gateway` then protects every MCP route with its own OAuth
	// authorization server (docs/gateway.md), and "token" must not be set.
	// `browserbridge gateway --public-url` overrides it; `serve` (the
	// local bridge) refuses a config that sets it.
	PublicURL string `json:"public_url,omitempty"`
	// MaxConnsPerIP caps the TCP connections a public gateway holds open
	// at once from one address (an IPv4 address, an IPv6 /64), trusted
	// proxies (trusted_proxies) excepted; 0 means 256, -1 no cap.
	// `browserbridge gateway --max-conns-per-ip` overrides it.
	MaxConnsPerIP int `json:"max_conns_per_ip,omitempty"`
	// IdleTimeout closes a keep-alive connection that sends no next
	// request for this long, as a Go duration; "" means 60s on a public
	// gateway and 2m otherwise. `--idle-timeout` overrides it.
	IdleTimeout string `json:"idle_timeout,omitempty"`
}

// DefaultMaxConnsPerIP is gateway.max_conns_per_ip's default, the proxy's.
const DefaultMaxConnsPerIP = 256

// ConnsPerIP is the cap MaxConnsPerIP sets: 0 for none.
func (g *Gateway) ConnsPerIP() int {
	switch {
	case g.MaxConnsPerIP == 0:
		return DefaultMaxConnsPerIP
	case g.MaxConnsPerIP < 0:
		return 0
	}
	return g.MaxConnsPerIP
}

// Idle is IdleTimeout parsed; 0 when unset (Validate refuses an invalid one).
func (g *Gateway) Idle() time.Duration {
	d, _ := parseDuration(g.IdleTimeout)
	return d
}

// AggregateWait is AggregateTimeout parsed; 0 (the gateway's default)
// when unset or invalid (Validate refuses an invalid one).
func (g *Gateway) AggregateWait() time.Duration {
	d, _ := parseDuration(g.AggregateTimeout)
	return d
}

// WatchEnabled reports whether the servers' file is watched (Watch, or
// true when unset).
func (g *Gateway) WatchEnabled() bool {
	return g.Watch == nil || *g.Watch
}

// dnsLabel is one label of a DNS name, in lowercase.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// isDNSName reports whether s is a DNS name of lowercase labels, without
// a trailing dot.
func isDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel.MatchString(l) {
			return false
		}
	}
	return true
}

// Validate checks the gateway settings, naming the key at fault.
func (g *Gateway) Validate() error {
	if strings.ContainsRune(g.ServersFile, 0) {
		return errors.New(`config: key "gateway.servers_file": the path contains a NUL byte`)
	}
	if g.MaxChildren < 0 || g.MaxChildren > 1024 {
		return fmt.Errorf("config: key \"gateway.max_children\": %d is outside 0-1024 (0 means 8)", g.MaxChildren)
	}
	if d, err := parseDuration(g.AggregateTimeout); err != nil || d < 0 {
		return fmt.Errorf("config: key \"gateway.aggregate_timeout\": %q is not a duration such as \"2s\"", g.AggregateTimeout)
	}
	if d, err := parseDuration(g.IdleTimeout); err != nil || d < 0 {
		return fmt.Errorf("config: key \"gateway.idle_timeout\": %q is not a duration such as \"60s\"", g.IdleTimeout)
	}
	if g.MaxConnsPerIP < -1 {
		return fmt.Errorf("config: key \"gateway.max_conns_per_ip\": %d: use a number of connections, 0 for the default (%d) or -1 for no cap", g.MaxConnsPerIP, DefaultMaxConnsPerIP)
	}
	for _, k := range []struct{ key, val, example string }{
		{"host_prefix", g.HostPrefix, DefaultHostPrefix},
		{"host_domain", g.HostDomain, "example.com"},
	} {
		if k.val != "" && !isDNSName(k.val) {
			return fmt.Errorf("config: key \"gateway.%s\": %q is not a DNS name: use dot-separated labels of lowercase letters, digits and hyphens (e.g. %q)", k.key, k.val, k.example)
		}
	}
	return nil
}

// hasInlineServers reports whether the config's own mcpServers is set
// (not absent or null).
func (c *Config) hasInlineServers() bool {
	raw := bytes.TrimSpace(c.MCPServers)
	return len(raw) > 0 && string(raw) != "null"
}

// ServersFile returns gateway.servers_file resolved against the config
// file's directory (or the working directory when Path is ""), or "" when
// the servers are not in a file of their own.
func (c *Config) ServersFile() string {
	f := c.Gateway.ServersFile
	if f == "" || filepath.IsAbs(f) {
		return f
	}
	if c.Path != "" {
		return filepath.Join(filepath.Dir(c.Path), f)
	}
	if abs, err := filepath.Abs(f); err == nil {
		return abs
	}
	return f
}

// maxServersFileSize bounds the servers file Servers reads (ParseServers
// refuses anything larger than 4 MiB; one byte more is enough to tell).
const maxServersFileSize = 4<<20 + 1

// Servers returns the gateway's stdio servers and the file they came from,
// the one to watch: the servers file (ServersFile) when gateway.servers_file
// is set, else the config file itself (Path, "" after Decode). No servers
// is an empty map, not an error. Errors name the file and the key at
// fault and never quote env values.
func (c *Config) Servers() (map[string]stdio.ServerConfig, string, error) {
	if file := c.ServersFile(); file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, file, fmt.Errorf("reading the servers file (gateway.servers_file): %w", err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxServersFileSize))
		if err != nil {
			return nil, file, fmt.Errorf("reading the servers file (gateway.servers_file): %w", err)
		}
		servers, err := stdio.ParseServers(data)
		if err != nil {
			return nil, file, fmt.Errorf("%s: %w", file, err)
		}
		return servers, file, nil
	}
	if !c.hasInlineServers() {
		return map[string]stdio.ServerConfig{}, c.Path, nil
	}
	servers, err := stdio.DecodeServers(c.MCPServers, "mcpServers")
	if err != nil {
		if c.Path != "" {
			return nil, c.Path, fmt.Errorf("%s: config: %w", c.Path, err)
		}
		return nil, c.Path, fmt.Errorf("config: %w", err)
	}
	return servers, c.Path, nil
}

// Relay configures the cloud relay client: each connected browser registers
// with the proxy at URL as its own extension.
type Relay struct {
	// URL is the proxy's base WebSocket URL (wss://relay.example.com, with
	// or without a trailing slash) or its extensions' endpoint
	// (wss://relay.example.com/extension, as the proxy prints it); the
	// bridge connects to the latter. "" turns the relay off. ws:// is
	// allowed only for a loopback host.
	URL string `json:"url,omitempty"`
	// Token is the access token (kind extension) minted by the proxy's
	// operator. Required with URL.
	Token string `json:"token,omitempty"`
	// Name is announced to the proxy instead of "<browser> <version>
	// (<profile>)".
	Name string `json:"name,omitempty"`
	// Servers offers the gateway's stdio servers to the relay's user as
	// well (docs/relay.md, server extensions). nil means true; false keeps
	// them on this machine while the browsers are still relayed.
	Servers *bool `json:"servers,omitempty"`
	// ReplaceServers lets this bridge take a server name over from
	// another bridge of the same user that offers a server of that name
	// through the proxy (docs/relay.md, "One holder per server name"):
	// that bridge's registration ends. false (the default): the first
	// bridge keeps the name, and this one's server is not offered while
	// it does (shown in `browserbridge status`).
	ReplaceServers bool `json:"replace_servers,omitempty"`
}

// OffersServers reports whether the relay offers the gateway's servers.
func (r *Relay) OffersServers() bool { return r.Servers == nil || *r.Servers }

// Validate checks the relay settings, naming the key at fault.
func (r *Relay) Validate() error {
	if r.URL == "" {
		if r.Token != "" || r.Name != "" || r.Servers != nil || r.ReplaceServers {
			return errors.New(`config: key "relay.url": required when "relay.token", "relay.name", "relay.servers" or "relay.replace_servers" is set (e.g. wss://relay.example.com)`)
		}
		return nil
	}
	if r.ReplaceServers && !r.OffersServers() {
		return errors.New(`config: key "relay.replace_servers": has no effect with "relay.servers": false (no server is offered to take a name for)`)
	}
	// The proxy's base URL or its /extension endpoint; anything else is
	// refused here, at start, rather than dialled in a loop.
	if _, err := relaywire.EndpointURL(r.URL, relaywire.PathExtension); err != nil {
		return fmt.Errorf("config: key \"relay.url\": %w", err)
	}
	u, _ := url.Parse(r.URL)
	if u.Scheme == "ws" && !isLoopbackHost(u.Hostname()) {
		return fmt.Errorf("config: key \"relay.url\": %q sends the token unencrypted; use wss:// (ws:// is allowed only for localhost)", r.URL)
	}
	if r.Token == "" {
		return errors.New(`config: key "relay.token": required when "relay.url" is set (mint one with browserbridge-proxy token --kind extension)`)
	}
	if strings.ContainsAny(r.Token, " \t\r\n") {
		return errors.New(`config: key "relay.token": must not contain spaces or line breaks`)
	}
	if len(r.Name) > 256 {
		return fmt.Errorf("config: key \"relay.name\": %d bytes is over the 256-byte limit", len(r.Name))
	}
	return nil
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// ParseTrustedProxy reads one "trusted_proxies" entry: an IP address (a
// single host) or a network in CIDR form. A network with host bits set is
// taken as the network ("10.1.2.3/8" is 10.0.0.0/8). Every address (a
// prefix of length 0) is refused: any client could then write the address
// it is counted under.
func ParseTrustedProxy(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or a network such as 172.16.0.0/12", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or a network such as 172.16.0.0/12", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	p = p.Masked()
	if p.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("%q trusts every address, so any client could choose the address it is counted under; list only your proxies' addresses", s)
	}
	return p, nil
}

// TrustedProxyPrefixes returns "trusted_proxies" parsed (Validate and
// Defaults have checked every entry), or nil.
func (c *Config) TrustedProxyPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range c.TrustedProxies {
		if p, err := ParseTrustedProxy(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Durations parsed from the config; zero means the component's default.
type Durations struct {
	BrowserWait, SessionTimeout, SSEPingInterval time.Duration
}

// Durations returns the parsed durations (Validate has checked them).
func (c *Config) Durations() Durations {
	var d Durations
	d.BrowserWait, _ = parseDuration(c.BrowserWait)
	d.SessionTimeout, _ = parseDuration(c.SessionTimeout)
	d.SSEPingInterval, _ = parseDuration(c.SSEPingInterval)
	if c.SSEPingInterval != "" && d.SSEPingInterval == 0 {
		d.SSEPingInterval = -1 // "0s": off
	}
	return d
}

func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// Rate returns the rate limit and burst of each peer beyond loopback (0, 0
// = no limit).
func (c *Config) Rate() (float64, int) {
	return rateAndBurst(c.RateLimit, DefaultRateLimit, c.RateBurst)
}

// LoopbackRate returns the rate limit and burst loopback clients share (0, 0
// = no limit).
func (c *Config) LoopbackRate() (float64, int) {
	return rateAndBurst(c.LoopbackRateLimit, DefaultLoopbackRateLimit, 0)
}

// RateWaitDuration returns how long a request over a rate limit may wait
// for its turn (Validate has checked rate_wait).
func (c *Config) RateWaitDuration() time.Duration {
	if c.RateWait == "" {
		return DefaultRateWait
	}
	d, _ := parseDuration(c.RateWait)
	return d
}

func rateAndBurst(set *float64, def float64, burst int) (float64, int) {
	rate := def
	if set != nil {
		rate = *set
	}
	if rate == 0 {
		return 0, 0
	}
	if burst == 0 {
		burst = int(min(2*rate, 1<<30))
	}
	return rate, max(burst, 1)
}

// Log configures logging.
type Log struct {
	// File is the log file; "" means paths.BridgeLog(); "-" means stderr only.
	File string `json:"file,omitempty"`
	// MaxSizeMB is the size at which the file rotates; 0 means 10.
	MaxSizeMB int `json:"max_size_mb,omitempty"`
	// MaxBackups is how many rotated files are kept; 0 means 3.
	MaxBackups int `json:"max_backups,omitempty"`
	// Level is debug, info, warn or error; "" means info.
	Level string `json:"level,omitempty"`
}

// Load reads the config file at path. A missing file is not an error when
// path is the default one (the bridge runs on defaults); it is when the user
// named the file.
func Load(path string) (*Config, error) {
	explicit := path != ""
	if !explicit {
		var err error
		if path, err = paths.ConfigFile(); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !explicit {
			c := &Config{Path: path}
			return c, c.Defaults()
		}
		return nil, fmt.Errorf("reading config: %w", err)
	}
	defer f.Close()
	c, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	return c, nil
}

// Decode reads a config strictly, validates it and fills in defaults.
func Decode(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	var c Config
	if err := DecodeStrict(data, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, c.Defaults()
}

// DecodeStrict decodes JSON into v, refusing unknown keys, trailing data and
// values of the wrong type, with messages that name the key.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(data, err)
	}
	if dec.More() {
		return errors.New("config: unexpected data after the JSON object")
	}
	return nil
}

func describeJSONError(data []byte, err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line := 1 + bytes.Count(data[:min(int(syntax.Offset), len(data))], []byte("\n"))
		return fmt.Errorf("config: invalid JSON on line %d: %v", line, syntax)
	case errors.As(err, &typ):
		return fmt.Errorf("config: key %q must be %s, not %s", typ.Field, typeName(typ.Type.Kind().String()), typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return fmt.Errorf("config: unknown key %s (check its spelling)", strings.TrimPrefix(err.Error(), "json: unknown field "))
	case errors.Is(err, io.EOF):
		return errors.New("config: the file is empty; write {} for all defaults")
	}
	return fmt.Errorf("config: %w", err)
}

func typeName(kind string) string {
	switch kind {
	case "slice":
		return "a list"
	case "struct", "map":
		return "an object"
	case "int", "int64", "uint", "uint64":
		return "a whole number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	}
	return "a " + kind
}

var extensionIDPattern = regexp.MustCompile(`^[a-p]{32}$`)

// Validate checks values and names the key of the first problem.
func (c *Config) Validate() error {
	if c.Listen != "" {
		host, port, err := net.SplitHostPort(c.Listen)
		if err != nil {
			return fmt.Errorf("config: key \"listen\": %q is not host:port (e.g. %s)", c.Listen, DefaultListen)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("config: key \"listen\": port %q is not a number from 0 to 65535", port)
		}
		if host == "" {
			return fmt.Errorf("config: key \"listen\": name an address (127.0.0.1 keeps the bridge local); an empty host listens on every interface")
		}
	}
	if c.Socket != "" && !filepath.IsAbs(c.Socket) {
		return fmt.Errorf("config: key \"socket\": %q must be an absolute path", c.Socket)
	}
	for i, id := range c.AllowedExtensions {
		if !extensionIDPattern.MatchString(id) {
			return fmt.Errorf("config: key \"allowed_extensions[%d]\": %q is not an extension id (32 letters a-p)", i, id)
		}
	}
	if c.Log.MaxSizeMB < 0 || c.Log.MaxSizeMB > 1024 {
		return fmt.Errorf("config: key \"log.max_size_mb\": %d is outside 0-1024", c.Log.MaxSizeMB)
	}
	if c.Log.MaxBackups < 0 || c.Log.MaxBackups > 100 {
		return fmt.Errorf("config: key \"log.max_backups\": %d is outside 0-100", c.Log.MaxBackups)
	}
	for _, d := range []struct{ key, val string }{
		{"browser_wait", c.BrowserWait}, {"session_timeout", c.SessionTimeout}, {"sse_ping_interval", c.SSEPingInterval},
	} {
		if v, err := parseDuration(d.val); err != nil || v < 0 {
			return fmt.Errorf("config: key %q: %q is not a duration such as \"30s\" or \"5m\"", d.key, d.val)
		}
	}
	if c.SSEPing != "" && c.SSEPing != "event" && c.SSEPing != "comment" {
		return fmt.Errorf("config: key \"sse_ping\": %q is not \"event\" or \"comment\"", c.SSEPing)
	}
	if c.RateLimit != nil && *c.RateLimit < 0 {
		return fmt.Errorf("config: key \"rate_limit\": %v is negative (0 turns the limit off)", *c.RateLimit)
	}
	if c.RateBurst < 0 {
		return fmt.Errorf("config: key \"rate_burst\": %d is negative", c.RateBurst)
	}
	if c.LoopbackRateLimit != nil && *c.LoopbackRateLimit < 0 {
		return fmt.Errorf("config: key \"loopback_rate_limit\": %v is negative (0 turns the limit off)", *c.LoopbackRateLimit)
	}
	if v, err := parseDuration(c.RateWait); err != nil || v < 0 || v > time.Minute {
		return fmt.Errorf("config: key \"rate_wait\": %q is not a duration from \"0s\" to \"1m\", such as \"1s\"", c.RateWait)
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("config: key \"max_body_bytes\": %d is negative", c.MaxBodyBytes)
	}
	for _, k := range []struct {
		key string
		val int
	}{{"max_sessions", c.MaxSessions}, {"max_sessions_per_client", c.MaxSessionsPerClient}} {
		if k.val < -1 {
			return fmt.Errorf("config: key %q: %d is not a number of sessions (-1 means no bound)", k.key, k.val)
		}
	}
	for i, p := range c.TrustedProxies {
		if _, err := ParseTrustedProxy(p); err != nil {
			return fmt.Errorf("config: key \"trusted_proxies[%d]\": %w", i, err)
		}
	}
	for i, o := range c.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "chrome-extension") || u.Host == "" || u.Path != "" {
			return fmt.Errorf("config: key \"allowed_origins[%d]\": %q is not an origin such as https://app.example.com", i, o)
		}
	}
	if err := c.Relay.Validate(); err != nil {
		return err
	}
	if err := c.Gateway.Validate(); err != nil {
		return err
	}
	if err := c.validatePublic(); err != nil {
		return err
	}
	if c.hasInlineServers() {
		servers, err := stdio.DecodeServers(c.MCPServers, "mcpServers")
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if len(servers) > 0 && c.Gateway.ServersFile != "" {
			return errors.New(`config: keys "mcpServers" and "gateway.servers_file": use one or the other (the servers live either in this file or in the servers file); move the servers there, or drop servers_file`)
		}
	}
	if c.Log.Level != "" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(c.Log.Level)); err != nil {
			return fmt.Errorf("config: key \"log.level\": %q is not debug, info, warn or error", c.Log.Level)
		}
	}
	return nil
}

// Defaults fills in the defaults of empty fields.
func (c *Config) Defaults() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Socket == "" {
		s, err := paths.Socket()
		if err != nil {
			return err
		}
		c.Socket = s
	}
	if t := os.Getenv(EnvToken); t != "" {
		c.Token = t
	}
	c.OAuth.fromEnv()
	if v := os.Getenv(EnvTrustedProxies); v != "" {
		list := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		for _, p := range list {
			if _, err := ParseTrustedProxy(p); err != nil {
				return fmt.Errorf("%s: %w", EnvTrustedProxies, err)
			}
		}
		c.TrustedProxies = list
	}
	if c.Gateway.HostPrefix == "" {
		c.Gateway.HostPrefix = DefaultHostPrefix
	}
	if c.Gateway.Watch == nil {
		watch := true
		c.Gateway.Watch = &watch
	}
	if c.Log.File == "" {
		f, err := paths.BridgeLog()
		if err != nil {
			return err
		}
		c.Log.File = f
	}
	return nil
}

// LogLevel returns the configured level.
func (c *Config) LogLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.Log.Level))
	return l
}
