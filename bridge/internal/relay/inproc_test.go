package relay

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeInProcess: a handler served in this process answers as over a
// connection: status, header and body; a stream arrives as it is written
// (the response is returned before the handler ends); closing the body
// ends the request's context; a panic fails the request, not the process.
func TestServeInProcess(t *testing.T) {
	newReq := func(t *testing.T, ctx context.Context) *http.Request {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://x.invalid/servers/a/mcp?q=1", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		req.RemoteAddr = "conn-1:0"
		return req
	}
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		status  int
		header  string
		body    string
		readErr bool
	}{
		{"json", func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"got":"` + string(b) + `","uri":"` + r.RequestURI + `","remote":"` + r.RemoteAddr + `"}`))
		}, 200, "application/json", `{"got":"body","uri":"/servers/a/mcp?q=1","remote":"conn-1:0"}`, false},
		{"status without a body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
		}, 202, "", "", false},
		{"nothing written", func(w http.ResponseWriter, r *http.Request) {}, 200, "", "", false},
		{"header changed after writing is not seen", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(404)
			w.Header().Set("Content-Type", "changed")
			w.Write([]byte("no"))
		}, 404, "text/plain", "no", false},
		{"panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") }, 500, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := serveInProcess(tc.h, newReq(t, context.Background()))
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.header || string(body) != tc.body || (err != nil) != tc.readErr {
				t.Fatalf("got %d %q %q %v", resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
			}
		})
	}

	t.Run("a stream arrives as it is written, and closing it ends the request", func(t *testing.T) {
		next := make(chan struct{})
		ended := make(chan struct{})
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(ended)
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			for i := 0; ; i++ {
				select {
				case <-next:
				case <-r.Context().Done():
					return
				}
				w.Write([]byte("data: event\n\n"))
				w.(http.Flusher).Flush()
			}
		})
		resp := serveInProcess(h, newReq(t, context.Background()))
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
		}
		rd := bufio.NewReader(resp.Body)
		for range 3 {
			next <- struct{}{}
			line, err := rd.ReadString('\n')
			if err != nil || line != "data: event\n" {
				t.Fatalf("read %q %v", line, err)
			}
			rd.ReadString('\n')
		}
		resp.Body.Close()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler still runs after the body was closed")
		}
	})

	t.Run("the caller's context ends the request", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ended := make(chan struct{})
		resp := serveInProcess(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			<-r.Context().Done()
			close(ended)
		}), newReq(t, ctx))
		defer resp.Body.Close()
		cancel()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler did not see the caller's context end")
		}
	})
}
