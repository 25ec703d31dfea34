package gwbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// drainGrace is how long a call keeps reading a text/event-stream response
// after its reply, waiting for the server to end it (so that the connection
// can be reused), before it cuts the response off.
const drainGrace = time.Second

// streamableSession is a session on the Streamable HTTP transport: every
// request is a POST whose response carries its reply, as one JSON body or as
// a text/event-stream that may carry other messages first.
type streamableSession struct {
	client  *http.Client
	url     string
	idx     int
	mux     *mux
	id      string // Mcp-Session-Id; "" for a stateless server
	version string // the negotiated protocol version
	once    sync.Once
}

var _ session = (*streamableSession)(nil)

// openStreamable initializes a session at url.
func openStreamable(ctx context.Context, client *http.Client, url string, idx int) (*streamableSession, error) {
	s := &streamableSession{client: client, url: url, idx: idx, mux: newMux()}
	id, _, p := s.mux.begin(idx, false)
	if err := s.roundTrip(ctx, id, initializeRequest(id), p); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	r := <-p.done // roundTrip left the settled reply for us
	if err := settled(r); err != nil {
		s.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	s.version = r.msg.Result.ProtocolVersion
	if err := s.roundTrip(ctx, 0, initializedNotification, nil); err != nil {
		s.close()
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return s, nil
}

func (s *streamableSession) call(ctx context.Context, worker int) error {
	id, msg, p := s.mux.begin(worker, true)
	if err := s.roundTrip(ctx, id, echoRequest(id, msg), p); err != nil {
		return err
	}
	return settled(<-p.done)
}

// roundTrip posts one message and delivers the messages of the response.
// For a request (p not nil) it fails unless the response settled p, and
// leaves the settled reply in p.done.
func (s *streamableSession) roundTrip(ctx context.Context, id int64, body []byte, p *pendingCall) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mcphttp.ContentTypeJSON)
	req.Header.Set("Accept", mcphttp.ContentTypeJSON+", "+mcphttp.ContentTypeSSE)
	if s.id != "" {
		req.Header.Set(mcphttp.HeaderSessionID, s.id)
	}
	if s.version != "" {
		req.Header.Set(mcphttp.HeaderProtocolVersion, s.version)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.mux.abandon(id)
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	if s.id == "" {
		s.id = resp.Header.Get(mcphttp.HeaderSessionID)
	}
	switch {
	case resp.StatusCode == http.StatusAccepted:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxEventSize))
		if p != nil {
			s.mux.abandon(id)
			return errors.New("POST: 202 Accepted for a request")
		}
		return nil
	case resp.StatusCode != http.StatusOK:
		s.mux.abandon(id)
		return fmt.Errorf("POST: %w", statusError(resp))
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case mcphttp.ContentTypeJSON:
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxEventSize+1))
		if err == nil && len(data) > maxEventSize {
			err = errEventTooLarge
		}
		if err != nil {
			s.mux.abandon(id)
			return fmt.Errorf("reading response: %w", err)
		}
		if p == nil && len(bytes.TrimSpace(data)) == 0 {
			return nil
		}
		msgs, err := decodeMessages(data)
		if err != nil {
			s.mux.abandon(id)
			return err
		}
		for _, m := range msgs {
			s.mux.deliver(m)
		}
	case mcphttp.ContentTypeSSE:
		if err := s.readStream(resp.Body, p, cancel); err != nil {
			s.mux.abandon(id)
			return err
		}
	default:
		if p == nil {
			return nil // a body for a notification: nothing to read from it
		}
		s.mux.abandon(id)
		return fmt.Errorf("POST: unexpected content type %q", resp.Header.Get("Content-Type"))
	}
	if p != nil && len(p.done) == 0 {
		s.mux.abandon(id)
		return fmt.Errorf("the response carried no reply to request %d", id)
	}
	return nil
}

// readStream delivers the messages of a text/event-stream response until the
// server ends it; once p is settled it waits at most drainGrace for that, then
// cuts the response off with cancel.
func (s *streamableSession) readStream(body io.Reader, p *pendingCall, cancel context.CancelFunc) error {
	events := mcphttp.NewSSEReader(body, maxEventSize)
	var grace *time.Timer
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	for {
		ev, err := events.Next()
		if err != nil {
			if err == io.EOF || grace != nil {
				return nil // ended, or cut off after our reply
			}
			return fmt.Errorf("reading event stream: %w", err)
		}
		if ev.Name != "message" || len(ev.Data) == 0 {
			continue
		}
		msgs, err := decodeMessages(ev.Data)
		if err != nil {
			s.mux.misrouted.Add(1)
			continue
		}
		for _, m := range msgs {
			s.mux.deliver(m)
		}
		if grace == nil && p != nil && len(p.done) > 0 {
			grace = time.AfterFunc(drainGrace, cancel)
		}
	}
}

func (s *streamableSession) replies() *mux { return s.mux }

// close ends the session with DELETE, as a polite client does; safe to call
// twice.
func (s *streamableSession) close() {
	s.once.Do(func() {
		if s.id == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), closeWait)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.url, nil)
		if err != nil {
			return
		}
		req.Header.Set(mcphttp.HeaderSessionID, s.id)
		if s.version != "" {
			req.Header.Set(mcphttp.HeaderProtocolVersion, s.version)
		}
		if resp, err := s.client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxEventSize))
			resp.Body.Close()
		}
	})
}
