package httpguard

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/benchload"
)

// discard is the cheapest ResponseWriter, so that the benchmarks measure
// the guard rather than httptest.ResponseRecorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

// setLoopbackRate gives loopback peers a limit that never refuses, so that
// the benchmarks pay for the limiter's bookkeeping.
func setLoopbackRate(o *Options, rate float64) {
	o.LoopbackRatePerSecond, o.LoopbackBurst = rate, 1<<30
}

var okHandler = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// BenchmarkGuard is the cost of the guard's checks for one request that
// passes them all, with a rate limit that does not refuse.
func BenchmarkGuard(b *testing.B) {
	cases := []struct {
		name   string
		opts   func(*Options)
		remote string
		header map[string]string
	}{
		{name: "loopback session", remote: "127.0.0.1:50000",
			header: map[string]string{"Mcp-Session-Id": "7c1e0b5e-session"}},
		{name: "loopback browser-shaped", remote: "127.0.0.1:50000",
			header: map[string]string{"Origin": inspectorOrigin, "Sec-Fetch-Site": "same-site"}},
		{name: "remote with token", remote: "192.0.2.7:50000",
			opts:   func(o *Options) { o.ListenAddr = "0.0.0.0:3456"; o.Token = testToken },
			header: map[string]string{"Authorization": "Bearer " + testToken}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			opts := baseOptions()
			opts.RatePerSecond, opts.Burst = 1e12, 1<<30
			setLoopbackRate(&opts, 1e12)
			if c.opts != nil {
				c.opts(&opts)
			}
			h, err := New(opts, okHandler)
			if err != nil {
				b.Fatal(err)
			}
			r := request{target: "/mcp"}.build()
			r.Body = http.NoBody
			r.ContentLength = 0
			r.RemoteAddr = c.remote
			for k, v := range c.header {
				r.Header.Set(k, v)
			}
			w := &discard{h: make(http.Header)}
			b.ReportAllocs()
			cpu := benchload.ProcessCPU()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkNewClient is the cost of a request from a client the limiter
// has not seen, once its table is full: every request comes from another
// address and names another session.
func BenchmarkNewClient(b *testing.B) {
	opts := baseOptions()
	opts.RatePerSecond, opts.Burst = 1e12, 1<<30
	setLoopbackRate(&opts, 1e12)
	h, err := New(opts, okHandler)
	if err != nil {
		b.Fatal(err)
	}
	r := request{target: "/mcp"}.build()
	r.Body = http.NoBody
	r.ContentLength = 0
	w := &discard{h: make(http.Header)}
	var addr []byte
	n := uint32(0)
	send := func() {
		n++
		// 11.0.0.0/8 and beyond: a new IPv4 address each time.
		v := n + 11<<24
		addr = strconv.AppendUint(addr[:0], uint64(v>>24), 10)
		for _, s := range []uint32{16, 8, 0} {
			addr = append(addr, '.')
			addr = strconv.AppendUint(addr, uint64(v>>s&0xff), 10)
		}
		addr = append(addr, ":1234"...)
		r.RemoteAddr = string(addr)
		r.Header.Set("Mcp-Session-Id", r.RemoteAddr)
		clear(w.h)
		h.ServeHTTP(w, r)
	}
	for range 20000 { // fill the table past any bound
		send()
	}
	b.ReportAllocs()
	cpu := benchload.ProcessCPU()
	for b.Loop() {
		send()
	}
	reportCPU(b, cpu)
}

// reportCPU reports the process's CPU time per operation since start: on a
// shared machine, other load disturbs it far less than ns/op.
func reportCPU(b *testing.B, start time.Duration) {
	if used := benchload.ProcessCPU() - start; used > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
