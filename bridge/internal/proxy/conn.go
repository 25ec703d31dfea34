package proxy

import (
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/wsconn"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// wsConn is one WebSocket connection of the proxy: a wsconn.Conn (its
// one writer, its queue, its close handshake; see there for which methods
// any goroutine may call) and the state of its one reader, the goroutine
// that runs ReadLoop (started by the HTTP handler).
type wsConn struct {
	*wsconn.Conn
	s *Server

	lim *httpguard.Bucket // this connection's rate

	// reader-only state
	strikes     int
	strikeStart time.Time
}

// connOptions are the options of every connection of s.
func (s *Server) connOptions() *wsconn.Options {
	o := &s.opts
	return &wsconn.Options{
		PongWait:       o.PongWait,
		WriteWait:      o.WriteWait,
		MaxMessageSize: o.MaxMessageSize,
		ReadLimit:      o.hardLimit(),
		SendQueue:      o.SendQueue,
		Received:       func(n int) { s.m.bytesIn.Add(float64(n)) },
		Sent:           func(n int) { s.m.bytesOut.Add(float64(n)) },
	}
}

// strike counts a refused message and reports whether the connection has
// now been refused too often (Strikes within one second) and must close.
func (c *wsConn) strike(now time.Time) bool {
	if c.s.opts.Strikes < 0 {
		return false
	}
	if now.Sub(c.strikeStart) > time.Second {
		c.strikeStart, c.strikes = now, 0
	}
	c.strikes++
	return c.strikes > c.s.opts.Strikes
}

// refuse answers a bad message with a JSON-RPC error and counts a strike;
// an abusive connection is closed with a policy-violation close frame.
func (c *wsConn) refuse(id []byte, e *relaywire.Error, reason string) {
	c.answer(id, e, reason)
	if c.strike(time.Now()) {
		c.Close(websocket.ClosePolicyViolation, "too many refused messages: "+e.Message)
	}
}

// answer refuses a message that was not the client's fault (its extension
// went away under it): the same error, counted the same, but no strike.
func (c *wsConn) answer(id []byte, e *relaywire.Error, reason string) {
	c.s.m.refused.With(reason).Inc()
	c.Send(relaywire.AppendError(nil, id, e))
}

// newBucket is a connection's or a user's rate limit: rate messages a
// second, bursts of twice that; nil (none) when rate is not positive.
func newBucket(rate float64) *httpguard.Bucket { return httpguard.NewBucket(rate, 2*rate) }
