package hostlink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/browserbridge/browserbridge/bridge/nativemsg/rpcstream"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// ErrBrowserGone is returned for calls to a browser whose link closed before
// it answered: the host exited, the browser quit, or the bridge is stopping.
var ErrBrowserGone = errors.New("the browser disconnected before answering")

// ErrDuplicateID is returned when a call reuses an id still in flight.
var ErrDuplicateID = errors.New("request id is already in flight on this browser")

// Browser is one connected browser profile, known from its hello.
type Browser struct {
	link        *link
	id          string
	connectedAt time.Time
	lastActive  atomic.Int64 // unix nanoseconds
	nextID      atomic.Uint64

	mu      sync.Mutex
	hello   protocol.HelloParams
	hostPID int
	gone    bool
}

// ID is the browser's stable id (the extension's instance id).
func (b *Browser) ID() string { return b.id }

// LastActive is when the browser last said hello, sent a message or
// answered a call.
func (b *Browser) LastActive() time.Time { return time.Unix(0, b.lastActive.Load()) }

func (b *Browser) touch() { b.lastActive.Store(time.Now().UnixNano()) }

func (b *Browser) setHello(p protocol.HelloParams, hostPID int) {
	b.mu.Lock()
	b.hello, b.hostPID = p, hostPID
	b.mu.Unlock()
	b.touch()
}

func (b *Browser) markGone() {
	b.mu.Lock()
	b.gone = true
	b.mu.Unlock()
}

// Info describes the browser for status reports.
func (b *Browser) Info() protocol.BrowserInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	return protocol.BrowserInfo{
		ID:               b.id,
		Name:             b.hello.Browser.Name,
		Version:          b.hello.Browser.Version,
		Profile:          b.hello.Profile,
		ExtensionID:      b.hello.Extension.ID,
		ExtensionVersion: b.hello.Extension.Version,
		HostPID:          b.hostPID,
		ConnectedAt:      b.connectedAt.UTC().Format(time.RFC3339),
		LastActive:       b.LastActive().UTC().Format(time.RFC3339Nano),
	}
}

// Identity is the browser's id, name and version: what a tool result's
// _meta names on every call, without Info's formatting of times.
func (b *Browser) Identity() (id, name, version string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.id, b.hello.Browser.Name, b.hello.Browser.Version
}

// Call sends a request to the browser and waits for its reply, returning the
// raw result. id is the request id on the link (see protocol's id
// prefixes); "" picks a fresh "bridge:<n>". An id still in flight is refused
// with ErrDuplicateID rather than risk a reply reaching the wrong caller. An
// error reply from the extension is returned as a *jsonrpc2.Error; a link
// that closes first yields ErrBrowserGone.
func (b *Browser) Call(ctx context.Context, id, method string, params any) (json.RawMessage, error) {
	if id == "" {
		id = protocol.IDPrefixBridge + strconv.FormatUint(b.nextID.Add(1), 10)
	}
	result, err := b.link.conn.Call(ctx, id, method, params)
	switch {
	case err == nil:
		b.touch()
		return result, nil
	case errors.Is(err, rpcstream.ErrDuplicateID):
		return nil, fmt.Errorf("%w: %q", ErrDuplicateID, id)
	case errors.Is(err, rpcstream.ErrClosed):
		return nil, fmt.Errorf("%s %s: %w", method, id, ErrBrowserGone)
	case ctx.Err() != nil:
		// The id stays taken until the late reply arrives or the link
		// closes: the conn still holds the call.
		return nil, ctx.Err()
	}
	var rpcErr *jsonrpc2.Error
	if errors.As(err, &rpcErr) {
		b.touch()
		return nil, rpcErr
	}
	// The request was never written (encoding or size): the conn has
	// freed its id, since nothing will answer.
	return nil, fmt.Errorf("sending %s to the browser: %w", method, err)
}

// Notify sends a notification to the browser.
func (b *Browser) Notify(ctx context.Context, method string, params any) error {
	if err := b.link.conn.Notify(method, params); err != nil {
		if errors.Is(err, rpcstream.ErrClosed) {
			return ErrBrowserGone
		}
		return fmt.Errorf("sending %s to the browser: %w", method, err)
	}
	return nil
}

// Done is closed when the browser's link closes.
func (b *Browser) Done() <-chan struct{} { return b.link.conn.Done() }
