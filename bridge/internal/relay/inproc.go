package relay

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// serveInProcess serves req with h in this process, as net/http would
// serve it over a connection, and returns the response as soon as the
// handler has written its header (or returned): the body then streams, so
// that a text/event-stream answer can be read event by event while the
// handler is still writing. Closing the body ends the request's context,
// which is how a client leaving looks to the handler. No socket is
// involved: the gateway's servers stay unreachable from the network.
func serveInProcess(h http.Handler, req *http.Request) *http.Response {
	ctx, cancel := context.WithCancel(req.Context())
	req = req.WithContext(ctx)
	if req.RequestURI == "" {
		req.RequestURI = req.URL.RequestURI()
	}
	pr, pw := io.Pipe()
	w := &pipeResponse{header: make(http.Header), pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			if r := recover(); r != nil {
				// As net/http does: the request fails, the process lives.
				w.WriteHeader(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("the handler panicked: %v", r))
				return
			}
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing
			pw.Close()
		}()
		h.ServeHTTP(w, req)
	}()
	<-w.ready
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &cancelBody{ReadCloser: pr, cancel: cancel}, ContentLength: -1, Request: req,
	}
}

// pipeResponse is the http.ResponseWriter of serveInProcess: the header is
// taken at the first WriteHeader, Write or Flush; the body goes through a
// pipe, so a write waits for the reader, as on a connection.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter

	once   sync.Once
	status int
	sent   http.Header
	ready  chan struct{}
}

var _ http.Flusher = (*pipeResponse)(nil)

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() {
		w.status, w.sent = code, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeResponse) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush sends the header; the body is never buffered.
func (w *pipeResponse) Flush() { w.WriteHeader(http.StatusOK) }

// cancelBody ends the request when the body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	b.cancel()
	return b.ReadCloser.Close()
}
