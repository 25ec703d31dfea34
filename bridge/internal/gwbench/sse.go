package gwbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

// maxEventSize bounds one server-sent event (and one line of it, and one
// stdio message): a larger one is an error, not an allocation.
const maxEventSize = 4 << 20

var errEventTooLarge = fmt.Errorf("%w: larger than %d bytes", mcphttp.ErrEventTooLarge, maxEventSize)

// sseSession is a session on the HTTP+SSE transport (MCP 2024-11-05): one
// GET stream carries every reply, requests are POSTed to the URL of the
// stream's first "endpoint" event, and replies are routed by id.
type sseSession struct {
	client   *http.Client
	idx      int
	endpoint string
	mux      *mux
	cancel   context.CancelFunc // ends the stream
	done     chan struct{}      // closed when the stream reader returns
}

var _ session = (*sseSession)(nil)

// openSSE opens the stream at sseURL, waits for its endpoint and initializes
// the session. ctx bounds the opening, not the stream.
func openSSE(ctx context.Context, client *http.Client, sseURL string, idx int) (*sseSession, error) {
	streamCtx, cancel := context.WithCancel(context.Background())
	s := &sseSession{client: client, idx: idx, mux: newMux(), cancel: cancel, done: make(chan struct{})}
	stop := context.AfterFunc(ctx, cancel) // abandon the stream if opening is abandoned
	defer stop()
	req, err := http.NewRequestWithContext(streamCtx, http.MethodGet, sseURL, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", mcphttp.ContentTypeSSE)
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("GET %s: %w", sseURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		return nil, fmt.Errorf("GET %s: %s", sseURL, statusError(resp))
	}
	events := mcphttp.NewSSEReader(resp.Body, maxEventSize)
	ev, err := events.Next()
	for err == nil && ev.Name != "endpoint" {
		ev, err = events.Next()
	}
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("waiting for the endpoint event: %w", err)
	}
	base, _ := url.Parse(sseURL)
	ep, err := base.Parse(strings.TrimSpace(string(ev.Data)))
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("endpoint event %q: %w", ev.Data, err)
	}
	s.endpoint = ep.String()
	go s.read(resp.Body, events)

	id, _, p := s.mux.begin(idx, false)
	if err := s.roundTrip(ctx, id, initializeRequest(id), p); err != nil {
		s.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := s.post(ctx, initializedNotification); err != nil {
		s.close()
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	return s, nil
}

// read delivers the stream's messages until it ends, then fails every call
// still waiting.
func (s *sseSession) read(body io.ReadCloser, events *mcphttp.SSEReader) {
	defer close(s.done)
	defer body.Close()
	for {
		ev, err := events.Next()
		if err != nil {
			s.mux.failAll(fmt.Errorf("SSE stream ended: %w", err))
			return
		}
		if ev.Name != "message" {
			continue
		}
		msgs, err := decodeMessages(ev.Data)
		if err != nil {
			s.mux.misrouted.Add(1) // not a message for us, whatever it is
			continue
		}
		for _, m := range msgs {
			s.mux.deliver(m)
		}
	}
}

func (s *sseSession) call(ctx context.Context, worker int) error {
	id, msg, p := s.mux.begin(worker, true)
	return s.roundTrip(ctx, id, echoRequest(id, msg), p)
}

// roundTrip posts request id and waits for its reply on the stream.
func (s *sseSession) roundTrip(ctx context.Context, id int64, body []byte, p *pendingCall) error {
	if err := s.post(ctx, body); err != nil {
		s.mux.abandon(id)
		return err
	}
	select {
	case r := <-p.done:
		return settled(r)
	case <-ctx.Done():
		s.mux.abandon(id)
		return fmt.Errorf("waiting for reply %d: %w", id, ctx.Err())
	}
}

// post sends one message; the reply, if any, comes on the stream.
func (s *sseSession) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mcphttp.ContentTypeJSON)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST: %s", statusError(resp))
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxEventSize))
	return err
}

func (s *sseSession) replies() *mux { return s.mux }

// close ends the stream and waits for its reader; safe to call twice.
func (s *sseSession) close() {
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(closeWait):
	}
}

// statusError describes an unexpected HTTP response by its status and the
// start of its body.
func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if text := strings.TrimSpace(string(b)); text != "" {
		return fmt.Errorf("%s: %s", resp.Status, text)
	}
	return errors.New(resp.Status)
}
