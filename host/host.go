package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/ipc"
	"github.com/browserbridge/browserbridge/bridge/nativemsg"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

// Environment variables the host reads besides paths.EnvSocket.
const (
	// envBridgeBin names the browserbridge binary to start when no bridge
	// answers; the default is the one beside this executable.
	envBridgeBin = "BROWSERBRIDGE_BIN"
	// envExtensionIDs lists extra extension ids (comma-separated) allowed
	// to use this host, for development builds of the extension.
	envExtensionIDs = "BROWSERBRIDGE_EXTENSION_IDS"
)

// Timing of the connection to the bridge.
const (
	dialTimeout    = time.Second
	attachTimeout  = 5 * time.Second
	backoffMin     = 25 * time.Millisecond
	backoffMax     = 2 * time.Second
	respawnEvery   = 10 * time.Second // at most one bridge start per this
	bridgeIDPrefix = "h"              // chunk ids: "h<n>"
)

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	origin, err := callerOrigin(args)
	if err != nil {
		return err
	}
	if err := checkOrigin(origin); err != nil {
		return err
	}
	socket, err := paths.Socket()
	if err != nil {
		return err
	}
	enlargePipes()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &host{
		origin: origin,
		socket: socket,
		out:    nativemsg.NewBrowserWriter(stdout, bridgeIDPrefix),
		cancel: cancel,
	}
	h.log = slog.New(newHostLogHandler(stderr, h))
	h.log.Info("host started", "origin", origin, "socket", socket, "pid", os.Getpid(), "version", buildinfo.String())

	go h.readBrowser(ctx, bufio.NewReaderSize(stdin, 64<<10))
	h.maintainBridge(ctx)
	return nil
}

// callerOrigin takes Chrome's argv: the origin first, then flags such as
// --parent-window on Windows.
func callerOrigin(args []string) (string, error) {
	for _, a := range args {
		if strings.HasPrefix(a, "chrome-extension://") {
			return a, nil
		}
	}
	return "", errors.New("no calling origin: this program is started by the browser for the Browser Bridge extension " +
		"(argv[1] = chrome-extension://<id>/); run `browserbridge doctor` to check the installation")
}

func checkOrigin(origin string) error {
	allowed := []string{extension.Origin()}
	for _, id := range strings.Split(os.Getenv(envExtensionIDs), ",") {
		if id = strings.TrimSpace(id); id != "" {
			allowed = append(allowed, "chrome-extension://"+id+"/")
		}
	}
	if !slices.Contains(allowed, origin) {
		return fmt.Errorf("extension %s is not allowed to use this host (allowed: %s)", origin, strings.Join(allowed, ", "))
	}
	return nil
}

// host pumps frames between the browser (stdin/stdout) and the bridge (the
// current socket connection). Each direction is one goroutine that reads a
// frame and writes it through the other side's locked writer.
type host struct {
	origin string
	socket string
	log    *slog.Logger
	cancel context.CancelFunc

	outMu sync.Mutex // guards out: the one writer of stdout
	out   *nativemsg.BrowserWriter

	bridgeMu sync.Mutex // guards bridge and writes to it
	bridge   net.Conn   // nil while not attached

	dropped atomic.Int64 // frames from the browser with no bridge to take them
}

// readBrowser forwards the browser's frames to the bridge until stdin ends,
// which means Chrome closed the port: then the host stops.
func (h *host) readBrowser(ctx context.Context, stdin *bufio.Reader) {
	defer h.cancel()
	for {
		frame, err := nativemsg.ReadFrame(stdin, nativemsg.MaxFromBrowser)
		var tooLarge *nativemsg.FrameTooLargeError
		switch {
		case err == io.EOF:
			h.log.Info("browser closed the port; exiting")
			return
		case errors.As(err, &tooLarge):
			h.log.Warn("skipping an oversized frame from the browser", "size", tooLarge.Size)
			if _, err := io.CopyN(io.Discard, stdin, int64(tooLarge.Size)); err != nil {
				return
			}
			continue
		case errors.Is(err, nativemsg.ErrEmptyFrame):
			continue
		case err != nil:
			h.log.Warn("reading from the browser", "error", err)
			return
		}
		h.toBridge(frame)
	}
}

// toBridge writes one frame to the bridge, or drops it while there is none:
// the extension was told (host.state) and fails its own pending requests.
// It logs only after unlocking: the log handler takes bridgeMu too.
func (h *host) toBridge(frame []byte) {
	h.bridgeMu.Lock()
	conn := h.bridge
	if conn != nil {
		if err := nativemsg.WriteFrame(conn, frame, nativemsg.MaxLink); err != nil {
			// The reader of this connection sees the failure too and reconnects.
			conn.Close()
		}
	}
	h.bridgeMu.Unlock()
	if conn == nil {
		if n := h.dropped.Add(1); n == 1 || n%100 == 0 {
			h.log.Warn("no bridge connected; dropped frames from the browser", "dropped", n)
		}
	}
}

// toBrowser writes one message to the browser, chunked if over 1 MiB. A
// failed write means Chrome is gone: the host stops.
func (h *host) toBrowser(msg []byte) {
	h.outMu.Lock()
	err := h.out.WriteMessage(msg)
	h.outMu.Unlock()
	if err != nil {
		var tooLarge *nativemsg.FrameTooLargeError
		if errors.As(err, &tooLarge) {
			h.log.Warn("dropping a message too large for the browser", "size", tooLarge.Size)
			return
		}
		h.log.Info("browser port closed while writing; exiting", "error", err)
		h.cancel()
	}
}

func (h *host) sendState(st protocol.HostStateParams) {
	st.Socket = h.socket
	b, _ := json.Marshal(struct {
		JSONRPC string                   `json:"jsonrpc"`
		Method  string                   `json:"method"`
		Params  protocol.HostStateParams `json:"params"`
	}{"2.0", protocol.HostState, st})
	h.toBrowser(b)
}

// maintainBridge keeps the host attached to a bridge until ctx ends: dial,
// start a bridge if none answers, attach, pump, and after a loss start over
// with backoff. Each change is told to the extension; so is why a bridge
// the host started did not start (host.state "bridge_failed"), until a
// bridge answers.
func (h *host) maintainBridge(ctx context.Context) {
	attempt := 0
	var lastSpawn time.Time
	var spawned *bridgeStart            // the bridge this host started, until it answers or exits
	var failure *protocol.BridgeFailure // why spawned did not start, told unless the next attach succeeds
	failed := false                     // a start failed and no bridge has answered since
	toldStopped := false                // host.state "stopped" was sent for the current stop
	defer func() {
		if spawned != nil {
			spawned.forget()
		}
	}()
	h.sendState(protocol.HostStateParams{State: protocol.StateConnecting})
	for ctx.Err() == nil {
		conn, res, err := h.attach(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			attempt++
			if failure != nil {
				h.reportFailure(*failure, attempt, lastSpawn)
				failure, failed = nil, true
			}
			// While the bridge it started lives, the host waits for it: a
			// second one would only find the first one's lock. A bridge the
			// user stopped stays stopped until they start it.
			if spawned == nil && noBridge(err) && stoppedByUser(h.socket) {
				if !toldStopped {
					h.log.Info("the bridge was stopped with `browserbridge stop`; not starting one", "marker", paths.StopMarker(h.socket))
					h.sendState(protocol.HostStateParams{State: protocol.StateStopped})
					toldStopped = true
				}
			} else if spawned == nil && noBridge(err) && time.Since(lastSpawn) >= respawnEvery {
				toldStopped = false
				lastSpawn = time.Now()
				s, serr := h.startBridge()
				switch {
				case serr != nil:
					h.reportFailure(protocol.BridgeFailure{Kind: protocol.FailureBinary, Error: serr.Error(),
						Fix: "Reinstall with ./scripts/install.sh (or point BROWSERBRIDGE_BIN at the browserbridge binary), then run `browserbridge doctor`."},
						attempt, lastSpawn)
					failed = true
				case failed:
					spawned = s // the popup keeps showing the failure until this one answers
				default:
					spawned = s
					h.sendState(protocol.HostStateParams{State: protocol.StateStartingBridge, Attempt: attempt})
				}
			} else if attempt == 1 || attempt%20 == 0 {
				h.log.Info("bridge not reachable yet", "attempt", attempt, "error", err)
			}
			var exited <-chan struct{}
			if spawned != nil {
				exited = spawned.done
			}
			t := time.NewTimer(backoff(attempt))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			case <-exited:
				// Told only if the next attach fails too: a bridge that lost
				// the race for the socket to another host's is no failure.
				t.Stop()
				failure = spawned.failure()
				spawned = nil
			}
			continue
		}
		attempt = 0
		if spawned != nil {
			spawned.forget()
			spawned = nil
		}
		failure, failed, toldStopped = nil, false, false
		h.bridgeMu.Lock()
		h.bridge = conn
		h.bridgeMu.Unlock()
		h.sendState(protocol.HostStateParams{State: protocol.StateConnected, BridgeVersion: res.BridgeVersion})
		h.log.Info("attached to the bridge", "bridge_pid", res.PID, "bridge_version", res.BridgeVersion)

		err = h.readBridge(ctx, conn)

		h.bridgeMu.Lock()
		h.bridge = nil
		h.bridgeMu.Unlock()
		conn.Close()
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("lost the bridge; reconnecting", "error", err)
		h.sendState(protocol.HostStateParams{State: protocol.StateDisconnected, Error: "the bridge went away: " + err.Error()})
	}
}

// reportFailure logs why the bridge did not start and tells the extension,
// with when the host tries again.
func (h *host) reportFailure(f protocol.BridgeFailure, attempt int, lastSpawn time.Time) {
	h.log.Warn("the bridge did not start", "kind", f.Kind, "error", f.Error, "fix", f.Fix)
	retry := max(respawnEvery-time.Since(lastSpawn), 0)
	h.sendState(protocol.HostStateParams{State: protocol.StateBridgeFailed, Attempt: attempt,
		Error: "the bridge could not start: " + f.Error + ". " + f.Fix, Failure: &f, RetryInMs: retry.Milliseconds()})
}

// readBridge forwards the bridge's frames to the browser until the
// connection fails or ctx ends.
func (h *host) readBridge(ctx context.Context, conn net.Conn) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		frame, err := nativemsg.ReadFrame(br, nativemsg.MaxLink)
		if err != nil {
			if err == io.EOF {
				return errors.New("the bridge closed the connection")
			}
			return err
		}
		h.toBrowser(frame)
	}
}

// attach dials the bridge and performs host.attach. The bridge sends
// nothing before answering it, so the first frame is the reply.
func (h *host) attach(ctx context.Context) (net.Conn, *protocol.HostAttachResult, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, err := ipc.Dial(dctx, h.socket)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (net.Conn, *protocol.HostAttachResult, error) {
		conn.Close()
		return nil, nil, err
	}
	req, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": protocol.IDPrefixHost + "1", "method": protocol.HostAttach,
		"params": protocol.HostAttachParams{Protocol: protocol.Version, HostVersion: buildinfo.String(), PID: os.Getpid(), Origin: h.origin},
	})
	_ = conn.SetDeadline(time.Now().Add(attachTimeout))
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := nativemsg.WriteFrame(conn, req, nativemsg.MaxLink); err != nil {
		return fail(fmt.Errorf("sending host.attach: %w", err))
	}
	frame, err := nativemsg.ReadFrame(conn, nativemsg.MaxLink)
	if err != nil {
		return fail(fmt.Errorf("waiting for the bridge to answer host.attach: %w", err))
	}
	var reply struct {
		Result *protocol.HostAttachResult `json:"result"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(frame, &reply); err != nil {
		return fail(fmt.Errorf("reading the answer to host.attach: %w", err))
	}
	if reply.Error != nil {
		return fail(fmt.Errorf("the bridge refused this host: %s", reply.Error.Message))
	}
	if reply.Result == nil {
		return fail(errors.New("the bridge answered host.attach with neither result nor error"))
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, reply.Result, nil
}

// noBridge tells a socket nobody listens on from other failures.
func noBridge(err error) bool {
	return errors.Is(err, os.ErrNotExist) || isConnRefused(err)
}

// stoppedByUser reports whether `browserbridge stop` left its marker beside
// the socket.
func stoppedByUser(socket string) bool {
	_, err := os.Stat(paths.StopMarker(socket))
	return err == nil
}

func backoff(attempt int) time.Duration {
	d := backoffMin << min(attempt-1, 10)
	return min(d, backoffMax)
}
