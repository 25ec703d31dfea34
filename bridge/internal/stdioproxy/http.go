package stdioproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// The proxy speaks Streamable HTTP itself rather than through the SDK's
// client connection: a session must outlive a connection to the bridge.
// The SDK's connection learns its session id only from an initialize,
// ends the session (DELETE) when it is closed, and cannot resume a call's
// stream on another connection; the proxy keeps one session across bridge
// restarts and resumes a call's stream (Last-Event-ID) once the bridge is
// back.

// sessionGoneError is a 404 for the session: the bridge ended it (DELETE,
// the idle timeout, the session limit) or a restart could not keep it. It
// is mcp.ErrSessionMissing.
type sessionGoneError struct{ msg string }

func (e *sessionGoneError) Error() string { return "the bridge no longer has the session: " + e.msg }

func (e *sessionGoneError) Is(target error) bool { return target == mcp.ErrSessionMissing }

// httpError is an answer other than 2xx (and other than a 404 for the
// session).
type httpError struct {
	code   int
	status string         // "503 Service Unavailable"
	msg    string         // what the body said
	rpc    *jsonrpc.Error // the body's JSON-RPC error, if it was one
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %s: %s", e.status, e.msg) }

// transient says whether the refusal may pass (the SDK's list: 429, 5xx).
func (e *httpError) transient() bool {
	switch e.code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// failed turns an answer other than 2xx into an error, reading (and
// closing) its body.
func failed(resp *http.Response, sid string) error {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyMax))
	msg := strings.TrimSpace(string(body))
	var rpc *jsonrpc.Error
	if m, err := jsonrpc.DecodeMessage(body); err == nil {
		if r, ok := m.(*jsonrpc.Response); ok && r.Error != nil {
			if !errors.As(r.Error, &rpc) {
				rpc = &jsonrpc.Error{Code: CodeBridgeUnavailable, Message: r.Error.Error()}
			}
			msg = rpc.Message
		}
	}
	if msg == "" {
		msg = "no reason given"
	}
	if resp.StatusCode == http.StatusNotFound && sid != "" {
		return &sessionGoneError{msg: msg}
	}
	return &httpError{code: resp.StatusCode, status: resp.Status, msg: msg, rpc: rpc}
}

// post sends one message to the bridge, in session sid ("" for none), and
// returns the 2xx answer, whose body the caller reads and closes. A 404 for
// the session is a *sessionGoneError; another answer that is not 2xx an
// *httpError; a failure to reach the bridge a *url.Error.
func (p *proxy) post(ctx context.Context, sid string, msg jsonrpc.Message) (*http.Response, error) {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("encoding a message for the bridge: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.opts.Endpoint, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mcphttp.ContentTypeJSON)
	req.Header.Set("Accept", mcphttp.ContentTypeJSON+", "+mcphttp.ContentTypeSSE)
	if sid != "" {
		req.Header.Set(mcphttp.HeaderSessionID, sid)
	}
	if r, ok := msg.(*jsonrpc.Request); ok && mcphttp.IsStateless(p.protoVersion()) {
		req.Header.Set(mcphttp.HeaderMethod, r.Method)
		if name := nameOf(r); name != "" {
			req.Header.Set(mcphttp.HeaderName, name)
		}
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, failed(resp, sid)
	}
	return resp, nil
}

// nameOf is what a request names, for the Mcp-Name header: the tool or
// prompt, or the resource's URI.
func nameOf(r *jsonrpc.Request) string {
	var params struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	switch r.Method {
	case "tools/call", "prompts/get":
		_ = json.Unmarshal(r.Params, &params)
		return params.Name
	case "resources/read":
		_ = json.Unmarshal(r.Params, &params)
		return params.URI
	}
	return ""
}

// readReply reads what the bridge sends back for a request: one JSON
// message, or an event stream up to the response with id want. Other
// messages on the way (progress, the bridge's own requests) go to the
// client. It returns that response, nil if the stream ended or broke
// without it, and the last event id seen (starting from lastID), from which
// the stream can be resumed; err means the reply is not one a client can
// read.
func (p *proxy) readReply(l *link, resp *http.Response, want jsonrpc.ID, lastID string) (answer *jsonrpc.Response, last string, err error) {
	defer resp.Body.Close()
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case mcphttp.ContentTypeJSON:
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxMessageBytes+1))
		if err != nil {
			return nil, lastID, nil // cut off: like a stream that broke
		}
		if len(body) > maxMessageBytes {
			return nil, lastID, fmt.Errorf("the bridge's answer exceeds %d bytes", maxMessageBytes)
		}
		msg, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			return nil, lastID, fmt.Errorf("the bridge's answer is not a JSON-RPC message: %w", err)
		}
		if r, ok := msg.(*jsonrpc.Response); ok && r.ID == want {
			return r, lastID, nil
		}
		p.fromBridge(l, msg)
		return nil, lastID, nil
	case mcphttp.ContentTypeSSE:
		rd := mcphttp.NewSSEReader(resp.Body, maxMessageBytes)
		for {
			ev, err := rd.Next()
			// An id with no data, which Next does not return, counts too.
			if id := rd.LastEventID(); id != "" {
				lastID = id
			}
			if err != nil {
				// io.EOF: the bridge ended the stream without the answer.
				// Anything else broke it (io.ErrUnexpectedEOF: cut inside
				// an event). Either way the caller resumes it from lastID.
				if !errors.Is(err, io.EOF) && p.ctx.Err() == nil {
					p.log.Debug("a call's stream broke", "id", want.Raw(), "last_event_id", lastID, "error", readError(err))
				}
				return nil, lastID, nil
			}
			if len(ev.Data) == 0 || ev.Name != "message" {
				continue // a priming event, or not a message
			}
			msg, err := jsonrpc.DecodeMessage(ev.Data)
			if err != nil {
				p.log.Warn("dropped a malformed message on a call's stream", "error", err)
				continue
			}
			if r, ok := msg.(*jsonrpc.Response); ok && r.ID == want {
				return r, lastID, nil // the stream is not read past its answer
			}
			p.fromBridge(l, msg)
		}
	}
	if resp.StatusCode == http.StatusAccepted {
		return nil, lastID, errors.New("the bridge accepted the request but will not answer it")
	}
	return nil, lastID, fmt.Errorf("the bridge answered with Content-Type %q, neither application/json nor text/event-stream", ct)
}

// readError gives an error of mcphttp.SSEReader.Next its context.
func readError(err error) error {
	if errors.Is(err, mcphttp.ErrEventTooLarge) {
		return fmt.Errorf("a message from the bridge exceeds the proxy's %d-byte limit: %w", maxMessageBytes, err)
	}
	return fmt.Errorf("reading the bridge's event stream: %w", err)
}

// failure says what a failed exchange means for the message and the link.
type failure int

const (
	// notSent: the bridge never got the message (connection refused, or
	// its session is gone); resend it once reconnected.
	notSent failure = iota
	// lost: the connection broke after the message may have reached the
	// bridge.
	lost
	// refused: the bridge answered with an error; the link is fine.
	refused
	// busy: the bridge answered with a passing refusal (429, 5xx); the link
	// is fine.
	busy
	// closing: the proxy is stopping.
	closing
)

// classify reads an error of post. For refused and busy, the error to give
// the client comes too.
func (p *proxy) classify(err error) (failure, *jsonrpc.Error) {
	if p.ctx.Err() != nil {
		return closing, nil
	}
	if errors.Is(err, mcp.ErrSessionMissing) {
		return notSent, nil
	}
	if isDialError(err) {
		return notSent, nil
	}
	var he *httpError
	if errors.As(err, &he) {
		if he.transient() {
			return busy, &jsonrpc.Error{Code: CodeBridgeUnavailable, Message: "the bridge did not take the request: " + he.Error()}
		}
		if he.rpc != nil {
			return refused, he.rpc
		}
		return refused, &jsonrpc.Error{Code: CodeBridgeUnavailable, Message: "the bridge refused the request: " + he.Error()}
	}
	return lost, nil
}

// isDialError says whether err is a failure to connect, which the bridge
// never saw.
func isDialError(err error) bool {
	var ue *url.Error
	var oe *net.OpError
	return errors.As(err, &ue) && errors.As(ue.Err, &oe) && oe.Op == "dial"
}

// headerTransport adds the bearer token and the protocol version header.
type headerTransport struct {
	base    http.RoundTripper
	host    string // the endpoint's host: the token goes nowhere else
	token   string
	version func() string
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	auth := t.token != "" && req.URL.Host == t.host && req.Header.Get("Authorization") == ""
	version := ""
	if req.Header.Get(mcphttp.HeaderProtocolVersion) == "" {
		// Requests in a session, and every request of the stateless era,
		// name the negotiated version. A new session's initialize does not.
		if v := t.version(); v != "" && (req.Header.Get(mcphttp.HeaderSessionID) != "" || mcphttp.IsStateless(v)) {
			version = v
		}
	}
	if !auth && version == "" {
		return t.base.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	if auth {
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	if version != "" {
		r.Header.Set(mcphttp.HeaderProtocolVersion, version)
	}
	return t.base.RoundTrip(r)
}
