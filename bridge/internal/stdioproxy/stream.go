package stdioproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// maxStreamFailures is how many times in a row the GET stream may fail in
// ways that say nothing about the session (a 409, a stream the bridge
// ends at once) before the proxy gives up on it.
const maxStreamFailures = 5

// quickEnd: a GET stream the bridge ends sooner than this without a
// message counts as a failure (a bridge that ends every stream at once
// must not have the proxy reconnect in a loop).
const quickEnd = time.Second

// errNoStream means the server offers no standalone stream (405, or not an
// event stream): only replies to requests will arrive.
var errNoStream = errors.New("the server offers no standalone stream")

// errStreamEnded: the bridge ended the GET stream, as it does when it
// stops.
var errStreamEnded = errors.New("the bridge ended the GET stream")

// openStream opens the standalone GET stream of l's session, which carries
// the server's requests and notifications outside any call (such as
// notifications/tools/list_changed), and keeps it open for the link's
// life. It returns once the stream is open (or failed to open), so nothing
// the server sends after that is lost.
func (p *proxy) openStream(l *link) {
	sid := p.sessionOf(l)
	if sid == "" || mcphttp.IsStateless(p.protoVersion()) {
		return // no session, or the stateless era: no GET stream
	}
	resp, err := p.getStream(l.ctx, sid, "", attemptTimeout)
	p.listenOn(l, sid, resp, err)
}

// listenOn starts listen in the background.
func (p *proxy) listenOn(l *link, sid string, resp *http.Response, err error) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.listen(l, sid, resp, err)
	}()
}

// listen reads the GET stream for the link's life. The bridge ends it
// when it stops (or ends the session) and it breaks when the bridge dies:
// either way the link is broken, keeping the session, and the reconnect
// learns which it was (a 404 ends the session). Until the bridge is back,
// the client's requests wait for it rather than reach a bridge on its
// way out. A GET answered with another status (a 409 while the bridge
// lets the last stream go) is tried again a few times.
func (p *proxy) listen(l *link, sid string, resp *http.Response, err error) {
	failures := 0
	for {
		if l.ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return
		}
		var he *httpError
		var ue *url.Error
		switch {
		case err == nil:
			opened := time.Now()
			messages, perr := p.pump(l, resp)
			if l.ctx.Err() != nil {
				return
			}
			if !p.streamLived(messages > 0 || time.Since(opened) >= quickEnd) {
				p.log.Warn("gave up on the GET stream: the bridge ends it at once; server notifications arrive only during calls", "session", sid)
				return
			}
			if perr == nil {
				perr = errStreamEnded
			}
			p.breakLink(l, fmt.Errorf("GET stream: %w", perr))
			return
		case errors.Is(err, mcp.ErrSessionMissing), errors.As(err, &ue):
			p.breakLink(l, fmt.Errorf("GET stream: %w", err))
			return
		case errors.Is(err, errNoStream):
			p.log.Debug("no standalone stream: server notifications arrive only during calls", "error", err)
			return
		case errors.As(err, &he):
			failures++
		default:
			p.log.Warn("GET stream", "error", err)
			return
		}
		if failures >= maxStreamFailures {
			p.log.Warn("gave up on the GET stream: server notifications arrive only during calls", "session", sid, "error", err)
			return
		}
		t := time.NewTimer(retryFirst << failures)
		select {
		case <-t.C:
		case <-l.ctx.Done():
			t.Stop()
			return
		}
		resp, err = p.getStream(l.ctx, sid, "", attemptTimeout)
	}
}

// streamLived notes how a GET stream ended: after messages or a while
// (lived), or at once. It returns false once too many in a row ended at
// once.
func (p *proxy) streamLived(lived bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if lived {
		p.quickEnds = 0
	} else {
		p.quickEnds++
	}
	return p.quickEnds < maxStreamFailures
}

// getStream opens a GET stream of session sid: the standalone one, or with
// lastEventID the rest of a stream from there. The answer must come within
// timeout (0: no bound); the stream then lasts as long as ctx. A 404 is a
// *sessionGoneError, another status an *httpError, a bridge that does not
// answer a *url.Error.
func (p *proxy) getStream(ctx context.Context, sid, lastEventID string, timeout time.Duration) (*http.Response, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.opts.Endpoint, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", mcphttp.ContentTypeSSE)
	req.Header.Set(mcphttp.HeaderSessionID, sid)
	if lastEventID != "" {
		req.Header.Set(mcphttp.HeaderLastEventID, lastEventID)
	}
	if timeout > 0 {
		timer := time.AfterFunc(timeout, cancel)
		defer timer.Stop()
	}
	resp, err := p.http.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusOK && ct == mcphttp.ContentTypeSSE:
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		return resp, nil
	case lastEventID == "" && (resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusOK):
		resp.Body.Close()
		err = fmt.Errorf("%w (HTTP %s, %q)", errNoStream, resp.Status, ct)
	default:
		err = failed(resp, sid)
	}
	cancel()
	return nil, err
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// pump passes the stream's messages to the client until it ends. It
// returns how many came, and the error that broke the stream (nil when
// the bridge ended it; one cut inside an event broke).
func (p *proxy) pump(l *link, resp *http.Response) (int, error) {
	defer resp.Body.Close()
	rd := mcphttp.NewSSEReader(resp.Body, maxMessageBytes)
	n := 0
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, readError(err) // io.ErrUnexpectedEOF: cut inside an event
		}
		if len(ev.Data) == 0 || ev.Name != "message" {
			continue // a priming event, or not a message
		}
		msg, err := jsonrpc.DecodeMessage(ev.Data)
		if err != nil {
			p.log.Warn("dropped a malformed message on the GET stream", "error", err)
			continue
		}
		n++
		p.fromBridge(l, msg)
	}
}
