package mcpserver

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/benchload"
)

// BenchmarkCallsFloor is the calibration of the call benchmarks: the raw
// client's loads against a server of the bridge's shape that does none of
// its work. A net/http handler sends each request's body over one
// multiplexed Unix socket (a writer lock, a table of waiting callers, one
// reader goroutine: the host link's shape) to an echo goroutine (the
// extension's place) and answers with what comes back. No JSON is parsed
// and no MCP session kept. Its figures are the least any bridge made of
// net/http and a socket can reach on this machine with the clients beside
// it; what the bridge adds is the difference.
func BenchmarkCallsFloor(b *testing.B) {
	b.Run("clients=10", func(b *testing.B) {
		closedLoop(b, 10, rawClients(b, floorServer(b), 10))
	})
	b.Run("clients=10/rate=10000", func(b *testing.B) {
		pacedLoop(b, 10, 10_000, rawClients(b, floorServer(b), 10))
	})
}

// floorServer starts BenchmarkCallsFloor's server and returns its URL.
func floorServer(b *testing.B) string {
	sock := filepath.Join(b.TempDir(), "floor.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err == nil {
			echoFrames(c)
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	link := &floorLink{w: bufio.NewWriter(c), waiting: map[uint32]chan []byte{}}
	go link.read(c)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		reply := link.call(body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
		w.Header().Set("Mcp-Session-Id", "floor") // all rawClients look for
		w.Write(reply)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// floorLink carries frames (length, id, body) over one connection for
// many callers at once.
type floorLink struct {
	wmu sync.Mutex
	w   *bufio.Writer

	mu      sync.Mutex
	next    uint32
	waiting map[uint32]chan []byte
}

func (l *floorLink) call(body []byte) []byte {
	ch := make(chan []byte, 1)
	l.mu.Lock()
	l.next++
	id := l.next
	l.waiting[id] = ch
	l.mu.Unlock()
	l.wmu.Lock()
	writeFrame(l.w, id, body)
	l.w.Flush()
	l.wmu.Unlock()
	return <-ch
}

func (l *floorLink) read(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		id, body, err := readFrame(r)
		if err != nil {
			return
		}
		l.mu.Lock()
		ch := l.waiting[id]
		delete(l.waiting, id)
		l.mu.Unlock()
		ch <- body
	}
}

// echoFrames answers every frame with itself, each from a goroutine of its
// own, as the fake extension answers each call.
func echoFrames(c net.Conn) {
	defer c.Close()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	var wmu sync.Mutex
	for {
		id, body, err := readFrame(r)
		if err != nil {
			return
		}
		go func() {
			wmu.Lock()
			defer wmu.Unlock()
			writeFrame(w, id, body)
			w.Flush()
		}()
	}
}

func writeFrame(w io.Writer, id uint32, body []byte) {
	var hdr [8]byte
	binary.LittleEndian.PutUint32(hdr[:4], uint32(len(body)))
	binary.LittleEndian.PutUint32(hdr[4:], id)
	w.Write(hdr[:])
	w.Write(body)
}

func readFrame(r io.Reader) (uint32, []byte, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	body := make([]byte, binary.LittleEndian.Uint32(hdr[:4]))
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, fmt.Errorf("frame body: %w", err)
	}
	return binary.LittleEndian.Uint32(hdr[4:]), body, nil
}

// BenchmarkCallsVsFloor puts the bridge beside its floor in one run: the
// raw client's 10 clients against BenchmarkCallsFloor's server and against
// the bridge (fast path on, in this process), in alternating rounds
// (vsFloorRounds of each, b.N calls in all), so that both see the same
// moments of the machine. It reports each side's figures (floor- and
// bridge- prefixed) and the bridge's ratios to the floor: cpu-ratio (CPU
// time of the process per call) and p99-ratio. Issue 19's targets are
// cpu-ratio ≤ 1.3 and, at the rated load, p99-ratio ≤ 1.5; a run above
// them says so in a line that starts with "RATIO ABOVE".
//
// A third row offers half the rated load: on a machine where 10,000
// calls/s is close to what the bridge can serve at all (the 2-core
// reference machine), the rated row's p99 is mostly the queue of a server
// near saturation, and the half-load row shows the latency a call adds
// when neither side queues.
//
// Run it with a call count: -bench CallsVsFloor -benchtime 40000x.
func BenchmarkCallsVsFloor(b *testing.B) {
	const ratedLoad = 10_000
	for _, rate := range []float64{0, ratedLoad / 2, ratedLoad} {
		name := "clients=10"
		if rate > 0 {
			name += fmt.Sprintf("/rate=%.0f", rate)
		}
		b.Run(name, func(b *testing.B) {
			floorSide := &benchload.Side{Name: "floor", Run: clientsRun(rawClients(b, floorServer(b), 10), 10)}
			bridgeSide := &benchload.Side{Name: "bridge", Run: clientsRun(rawClients(b, inProcessBridge(b, false), 10), 10)}
			floor, bridge, judge := benchload.CompareInRounds(b, vsFloorRounds, rate, floorSide, bridgeSide)
			if !judge {
				return
			}
			if cpuRatio := float64(bridge.CPUPerCall) / float64(floor.CPUPerCall); cpuRatio > 1.3 {
				b.Logf("RATIO ABOVE 1.3: the bridge's CPU per call is %.2f× the floor's (%v against %v)", cpuRatio, bridge.CPUPerCall, floor.CPUPerCall)
			}
			if p99Ratio := float64(bridge.P99) / float64(floor.P99); rate == ratedLoad && p99Ratio > 1.5 {
				b.Logf("RATIO ABOVE 1.5: the bridge's p99 is %.2f× the floor's (%v against %v)", p99Ratio, bridge.P99, floor.P99)
			}
		})
	}
}

// vsFloorRounds is how many rounds of each side BenchmarkCallsVsFloor runs.
const vsFloorRounds = 5

// clientsRun is a benchload.Side's Run over call: n calls spread over the
// given clients, offered at rate calls/s (0: a closed loop), as pacedLoop
// makes them.
func clientsRun(call func(client int) error, clients int) func(n int64, rate float64) ([]time.Duration, time.Duration, error) {
	return func(n int64, rate float64) ([]time.Duration, time.Duration, error) {
		work := make(chan int64, clients)
		lat := make([][]time.Duration, clients)
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		sched := benchload.Schedule{Start: time.Now(), Rate: rate}
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range work {
					t0 := sched.Wait(k)
					if err := call(i); err != nil {
						errs <- err
						for range work {
						}
						return
					}
					lat[i] = append(lat[i], time.Since(t0))
				}
			}()
		}
		for k := range n {
			work <- k
		}
		close(work)
		wg.Wait()
		close(errs)
		return slices.Concat(lat...), time.Since(sched.Start), <-errs
	}
}
