package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
	"github.com/browserbridge/browserbridge/bridge/internal/metrics"
)

// serverEntry is one configured stdio server as the gateway serves it.
type serverEntry struct {
	name    string
	cfg     stdio.ServerConfig
	shared  *backend
	filter  *toolFilter // nil: every tool
	metrics *serverMetrics
	leftOut atomic.Pointer[LeftOut] // missing from the last aggregate list
}

func (g *Gateway) newServerEntry(cfg stdio.ServerConfig) *serverEntry {
	srv := &serverEntry{name: cfg.Name, cfg: cfg, filter: newToolFilter(cfg.Tools), metrics: g.m.forServer(cfg.Name)}
	srv.shared = newBackend(g, srv, false)
	return srv
}

// serverTarget serves one server's routes.
type serverTarget struct{ srv *serverEntry }

func (t serverTarget) name() string { return t.srv.name }

// backendOf returns the session's backend on this server.
func (t serverTarget) backendOf(s *Session) *backend {
	if s.b != nil {
		return s.b
	}
	return t.srv.shared
}

func (t serverTarget) open(ctx context.Context, s *Session, initParams json.RawMessage) (json.RawMessage, error) {
	b := t.srv.shared
	if t.srv.cfg.PerSession {
		b = newBackend(s.g, t.srv, true)
		b.privateInit = initParams
		s.b = b
	}
	b.attach(s)
	_, init, err := b.ready(ctx)
	if err != nil {
		b.detach(s)
		return nil, err
	}
	return init, nil
}

func (t serverTarget) request(ctx context.Context, s *Session, e *mcphttp.Message, sink mcphttp.Sink) {
	b := t.backendOf(s)
	switch e.Method {
	case "tools/call":
		name, err := e.ParamName()
		if err != nil || name == "" {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InvalidParams, "tools/call needs params.name, the tool to call"), true)
			return
		}
		if !t.srv.filter.allows(name) {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InvalidParams, fmt.Sprintf("tool %q is not available on %q: the gateway's configuration does not allow it", name, t.srv.name)), true)
			return
		}
	case "resources/subscribe", "resources/unsubscribe":
		uri, err := e.ParamURI()
		if err != nil || uri == "" {
			sink.Send(mcphttp.ErrorBody(e.ID, rpccode.InvalidParams, e.Method+" needs params.uri"), true)
			return
		}
		// The child holds one subscription per uri for all sessions:
		// only the first subscriber and the last to leave reach it.
		if !b.subscribe(s, uri, e.Method == "resources/subscribe") {
			sink.Send(mcphttp.AppendResponse(nil, e.ID, json.RawMessage("{}"), nil), true)
			return
		}
	}
	b.forward(ctx, s, e, sink)
}

func (t serverTarget) notification(s *Session, e *mcphttp.Message) {
	b := t.backendOf(s)
	switch e.Method {
	case "notifications/cancelled":
		b.cancel(s, e.Params)
	case "notifications/roots/list_changed":
		// Only a private child has this client's roots to refresh.
		if b.private {
			b.sendRaw(appendNotification(nil, e.Method, e.Params))
		}
	default:
		b.sendRaw(appendNotification(nil, e.Method, e.Params))
	}
}

func (t serverTarget) response(s *Session, e *mcphttp.Message) error {
	return t.backendOf(s).answer(s, e)
}

func (t serverTarget) close(s *Session) { t.backendOf(s).detach(s) }

func (t serverTarget) discover(ctx context.Context) (json.RawMessage, error) {
	_, init, err := t.srv.shared.ready(ctx)
	if err != nil {
		return nil, err
	}
	return discoverResult(init, t.name())
}

// metaServerInfo is where a 2026-07-28 result carries the server's
// Implementation: a stateless client has no initialize result to read it
// from (the Go SDK leaves ServerInfo nil without it).
const metaServerInfo = "io.modelcontextprotocol/serverInfo"

// discoverResult builds a server/discover result from an initialize one;
// name stands in for a serverInfo the initialize result lacks.
func discoverResult(init json.RawMessage, name string) (json.RawMessage, error) {
	var ir struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions string          `json:"instructions,omitempty"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
	}
	if err := json.Unmarshal(init, &ir); err != nil {
		return nil, err
	}
	if ir.Capabilities == nil {
		ir.Capabilities = json.RawMessage("{}")
	}
	var info any = ir.ServerInfo
	if len(ir.ServerInfo) == 0 || ir.ServerInfo[0] != '{' {
		info = map[string]string{"name": name, "version": "unknown"}
	}
	return json.Marshal(map[string]any{
		"resultType":        "complete",
		"supportedVersions": mcphttp.Versions,
		"capabilities":      ir.Capabilities,
		"instructions":      ir.Instructions,
		"_meta":             map[string]any{metaServerInfo: info},
	})
}

// sendRaw writes a message to the running child, if any.
func (b *backend) sendRaw(msg []byte) {
	b.mu.Lock()
	c := b.conn
	b.mu.Unlock()
	if c != nil {
		_ = c.Send(msg)
	}
}

// toolFilter applies a server's tools.allow and tools.deny.
type toolFilter struct {
	allow, deny map[string]bool
}

func newToolFilter(f *stdio.ToolFilter) *toolFilter {
	if f == nil || (len(f.Allow) == 0 && len(f.Deny) == 0) {
		return nil
	}
	tf := &toolFilter{deny: map[string]bool{}}
	if len(f.Allow) > 0 {
		tf.allow = map[string]bool{}
		for _, n := range f.Allow {
			tf.allow[n] = true
		}
	}
	for _, n := range f.Deny {
		tf.deny[n] = true
	}
	return tf
}

func (f *toolFilter) allows(name string) bool {
	if f == nil {
		return true
	}
	if f.deny[name] {
		return false
	}
	return f.allow == nil || f.allow[name]
}

// apply removes the tools the filter hides from a tools/list result.
func (f *toolFilter) apply(result json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(result, &top) != nil {
		return result
	}
	var tools []json.RawMessage
	if json.Unmarshal(top["tools"], &tools) != nil {
		return result
	}
	kept := tools[:0]
	for _, t := range tools {
		var n struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &n) == nil && f.allows(n.Name) {
			kept = append(kept, t)
		}
	}
	top["tools"], _ = json.Marshal(kept)
	out, err := json.Marshal(top)
	if err != nil {
		return result
	}
	return out
}

// gatewayMetrics are the gateway's Prometheus series.
type gatewayMetrics struct {
	calls     *metrics.Counter
	latency   *metrics.Histogram
	srvReqs   *metrics.Counter
	up        *metrics.Gauge
	restarts  *metrics.Gauge
	sessions  *metrics.Gauge
	inflight  *metrics.Gauge
	transport *metrics.Counter
	ambiguous *metrics.Counter
}

func newGatewayMetrics(r *metrics.Registry) *gatewayMetrics {
	return &gatewayMetrics{
		calls:     r.NewCounter("browserbridge_gateway_requests_total", "Client requests forwarded to stdio servers, by server, method and outcome (ok, error).", "server", "method", "outcome"),
		latency:   r.NewHistogram("browserbridge_gateway_request_duration_seconds", "Time from forwarding a request to a stdio server to its answer.", []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "server"),
		srvReqs:   r.NewCounter("browserbridge_gateway_server_requests_total", "Requests from stdio servers to clients (sampling, elicitation, roots), by server and method.", "server", "method"),
		up:        r.NewGauge("browserbridge_gateway_server_up", "1 while the server's shared process runs.", "server"),
		restarts:  r.NewGauge("browserbridge_gateway_server_restarts", "Restarts of the server's shared process.", "server"),
		sessions:  r.NewGauge("browserbridge_gateway_sessions", "Client sessions open, by route (a server name or all).", "server"),
		inflight:  r.NewGauge("browserbridge_gateway_requests_in_flight", "Requests waiting for a stdio server's answer.", "server"),
		transport: r.NewCounter("browserbridge_gateway_sessions_total", "Client sessions opened, by route and transport.", "server", "transport"),
		ambiguous: r.NewCounter("browserbridge_gateway_server_requests_ambiguous_total", "Server requests with several possible askers: routed by inference (see docs/gateway.md).", "server", "method"),
	}
}

// serverMetrics are one server's series, looked up once.
type serverMetrics struct {
	m       *gatewayMetrics
	name    string
	latency *metrics.HistogramSeries
}

func (m *gatewayMetrics) forServer(name string) *serverMetrics {
	return &serverMetrics{m: m, name: name, latency: m.latency.With(name)}
}

func (sm *serverMetrics) answered(method string, failed bool, d time.Duration) {
	outcome := "ok"
	if failed {
		outcome = "error"
	}
	sm.m.calls.With(sm.name, methodLabel(method), outcome).Inc()
	sm.latency.Observe(d.Seconds())
}

func (sm *serverMetrics) serverRequest(method string) {
	sm.m.srvReqs.With(sm.name, methodLabel(method)).Inc()
}

func (sm *serverMetrics) ambiguous(method string) {
	sm.m.ambiguous.With(sm.name, methodLabel(method)).Inc()
}

// otherMethod is the method label of every request whose method the MCP
// specification does not define.
const otherMethod = "other"

// knownMethods are the request methods of the MCP specification (every
// version the gateway speaks, both directions). Method names are chosen by
// clients and children, so a label value must come from this fixed set:
// one series per invented name would let any client grow /metrics and the
// bridge's memory without bound.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
	"sampling/createMessage": true, "elicitation/create": true, "roots/list": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true,
	"server/discover": true,
}

// methodLabel is method as a metric label value: itself when the
// specification defines it, else "other".
func methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return otherMethod
}
