package proxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp/rpccode"
)

// Streamable HTTP sessions in a cluster. A stateful session lives on the
// node that initialized it, and its id begins with that node's name. A
// load balancer may send its next request to any node: that node passes
// the request on, untouched (bearer token included: the owner checks it),
// to the owner's advertised URL (ClusterOptions.AdvertiseURL, sent with its
// heartbeats). Stateless (2026-07-28) requests need none of this.

// hdrForwardedBy marks a request one node passed to another, so that it is
// never passed on twice; hdrForwardProof proves it (Keyring.ForwardProof:
// a MAC over the node, method, target, time and body): a node accepts a
// request marked forwarded only with a proof that verifies, so nobody but
// a node of the deployment can pass itself off as one.
const (
	hdrForwardedBy  = "Browserbridge-Forwarded-By"
	hdrForwardProof = "Browserbridge-Forward-Proof"
)

// sessionOwner returns the node that holds the session sid, if it is
// another node of the cluster, with the URL it is reached at.
func (c *clusterNode) sessionOwner(sid string) (node, base string, ok bool) {
	node, _, found := strings.Cut(sid, ".")
	if !found || node == c.opts.Node || !validNodeName.MatchString(node) {
		return "", "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.peers[node]
	if p == nil || !c.aliveLocked(node) || p.info.URL == "" {
		return node, "", false
	}
	return node, p.info.URL, true
}

// forwardSession passes r to the node that holds its session, and reports
// whether it did; false leaves r to this node (which will not find the
// session, and says so).
//
// A request another node passed here is checked instead: without a valid
// proof it is refused (403, answered: true).
func (c *clusterNode) forwardSession(w http.ResponseWriter, r *http.Request) bool {
	if by := r.Header.Get(hdrForwardedBy); by != "" {
		body, ok := readWholeBody(w, r)
		if !ok {
			return true
		}
		if err := c.ring.CheckForwardProof(r.Header.Get(hdrForwardProof), by, r.Method, r.URL.RequestURI(), body); err != nil {
			c.s.log.Debug("proxy cluster: refused a request marked as passed on by another node", "claimed_node", by, "err", err)
			mcphttp.WriteError(w, http.StatusForbidden, nil, rpccode.InvalidRequest,
				"this request is marked as passed on by another proxy node, but carries no valid proof from one: send it without the "+hdrForwardedBy+" header")
			return true
		}
		return false
	}
	sid := r.Header.Get(mcphttp.HeaderSessionID)
	if sid == "" {
		return false
	}
	node, base, ok := c.sessionOwner(sid)
	if !ok {
		return false
	}
	target, err := url.Parse(base)
	if err != nil {
		return false
	}
	// The body is read whole first: net/http ends a request's body once
	// the response begins, and the owner may start an event stream before
	// the body has all passed; the proof covers it too.
	body, ok := readWholeBody(w, r)
	if !ok {
		return true
	}
	proof := c.ring.ForwardProof(c.opts.Node, r.Method, r.URL.RequestURI(), body)
	c.m.httpForwarded.Inc()
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // the owner checks its public host
			pr.Out.Header.Set(hdrForwardedBy, c.opts.Node)
			pr.Out.Header.Set(hdrForwardProof, proof)
		},
		Transport:     c.httpTransport,
		FlushInterval: -1, // event streams pass at once
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			c.s.log.Info("proxy cluster: passing a session's request to its node failed", "peer", node, "err", err)
			w.Header().Set("Retry-After", "5")
			mcphttp.WriteError(w, http.StatusBadGateway, nil, rpccode.InternalError,
				"this session lives on proxy node "+node+", which could not be reached just now; try again, or initialize a new session")
		},
	}
	rp.ServeHTTP(w, r)
	return true
}

// readWholeBody reads r's body (the guard in front capped its size) and
// puts it back for the handlers after; false when it answered w with the
// error.
func readWholeBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if httpguard.IsTooLarge(err) {
			mcphttp.WriteError(w, http.StatusRequestEntityTooLarge, nil, rpccode.InvalidRequest, "the request's body is over this proxy's size limit")
		} else {
			mcphttp.WriteError(w, http.StatusBadRequest, nil, rpccode.ParseError, "the request's body could not be read: "+err.Error())
		}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body, true
}

func newClusterTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // nodes reach each other directly
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // a POST's answer may take as long as its call
		TLSHandshakeTimeout:   10 * time.Second,
	}
}
