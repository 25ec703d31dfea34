package stdioproxy

import (
	"bufio"
	"bytes"
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
	if sid == "" || p.protoVersion() >= statelessVersion {
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
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, sid)
	if lastEventID != "" {
		req.Header.Set(headerLastEventID, lastEventID)
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
	case resp.StatusCode == http.StatusOK && ct == "text/event-stream":
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
// the bridge ended it).
func (p *proxy) pump(l *link, resp *http.Response) (int, error) {
	defer resp.Body.Close()
	n := 0
	err := readEvents(resp.Body, maxMessageBytes, func(ev event) bool {
		if len(ev.data) == 0 || (ev.name != "" && ev.name != "message") {
			return true // a priming event, or not a message
		}
		msg, err := jsonrpc.DecodeMessage(ev.data)
		if err != nil {
			p.log.Warn("dropped a malformed message on the GET stream", "error", err)
			return true
		}
		n++
		p.fromBridge(l, msg)
		return true
	})
	return n, err
}

// event is one server-sent event.
type event struct {
	name, id string
	data     []byte
}

// readEvents parses a text/event-stream, calling fn for each event until
// fn returns false or the stream ends. Events larger than max fail the
// stream.
func readEvents(r io.Reader, max int, fn func(event) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), max)
	var ev event
	var data bytes.Buffer
	hasData := false
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if hasData || ev.id != "" {
				ev.data = bytes.Clone(data.Bytes())
				if !fn(ev) {
					return nil
				}
			}
			ev, hasData = event{}, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.name = string(value)
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
			if data.Len() > max {
				return fmt.Errorf("an event exceeds %d bytes", max)
			}
		case "id":
			if !bytes.ContainsRune(value, 0) {
				ev.id = string(value)
			}
		}
	}
	return sc.Err()
}
