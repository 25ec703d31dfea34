package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/protocol"
)

// hostLogHandler writes the host's log to stderr (Chrome's log) and, while
// attached, into the bridge's log as host.log notifications. Chrome starts
// one host per port, so the host has no log file of its own: two hosts
// would otherwise share, and rotate, one file.
type hostLogHandler struct {
	text slog.Handler
	h    *host
	mu   *sync.Mutex
	// pending keeps the last records from before the host attached, sent
	// with the first record after it does.
	pending *[]protocol.HostLogParams
	attrs   []slog.Attr
}

const maxPendingLogs = 64

func newHostLogHandler(stderr io.Writer, h *host) *hostLogHandler {
	return &hostLogHandler{
		text:    slog.NewTextHandler(stderr, nil),
		h:       h,
		mu:      new(sync.Mutex),
		pending: new([]protocol.HostLogParams),
	}
}

func (l *hostLogHandler) Enabled(ctx context.Context, lvl slog.Level) bool {
	return l.text.Enabled(ctx, lvl)
}

func (l *hostLogHandler) Handle(ctx context.Context, r slog.Record) error {
	err := l.text.Handle(ctx, r)
	p := protocol.HostLogParams{Time: r.Time.UTC().Format(time.RFC3339Nano), Level: r.Level.String(), Message: r.Message, Attrs: map[string]string{}}
	for _, a := range l.attrs {
		p.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool { p.Attrs[a.Key] = a.Value.String(); return true })

	l.mu.Lock()
	defer l.mu.Unlock()
	*l.pending = append(*l.pending, p)
	if len(*l.pending) > maxPendingLogs {
		*l.pending = (*l.pending)[1:]
	}
	l.h.bridgeMu.Lock()
	defer l.h.bridgeMu.Unlock()
	if l.h.bridge == nil {
		return err
	}
	for _, rec := range *l.pending {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": protocol.HostLog, "params": rec})
		if nativemsg.WriteFrame(l.h.bridge, b, nativemsg.MaxLink) != nil {
			break // the connection's reader notices and reconnects
		}
	}
	*l.pending = (*l.pending)[:0]
	return err
}

func (l *hostLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *l
	c.text = l.text.WithAttrs(attrs)
	c.attrs = append(append([]slog.Attr(nil), l.attrs...), attrs...)
	return &c
}

func (l *hostLogHandler) WithGroup(name string) slog.Handler {
	c := *l
	c.text = l.text.WithGroup(name)
	return &c
}
