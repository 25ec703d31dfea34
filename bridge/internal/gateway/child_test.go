package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/gateway/stdio"
)

// childModeVar makes the test binary act as a stdio MCP server, so that
// tests can run children that behave in ways no npm server does:
//
//	mcp     answers initialize, ping, tools/list (one tool, "pid") and
//	        tools/call (its process id, as text; tool "ask" first sends
//	        the caller a request of arguments.method); -32601 otherwise
//	hang    reads stdin and never answers anything
//	mute    answers initialize, then nothing more
//	slowlist mcp, but tools/list is answered after slowListDelay
//	setsid  mcp, after starting a grandchild in a session of its own (as
//	        daemons do), whose pid it writes to $GATEWAY_TEST_PIDFILE
//	sleeper sleeps until killed (the setsid grandchild)
//	holder  mcp, but tools/call "wait" is held unanswered until tool
//	        "release"; tool "state" answers {"held":[ids],"cancelled":[ids]}
//	        (the ids the child was sent, and those notifications/cancelled
//	        named, in order)
const childModeVar = "GATEWAY_TEST_CHILD"

// slowListDelay is how late a slowlist child answers tools/list: well
// past the aggregate budget the tests set (1 s).
const slowListDelay = 3 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeVar); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

func runChild(mode string) int {
	switch mode {
	case "sleeper":
		for {
			time.Sleep(time.Hour)
		}
	case "setsid":
		gc := exec.Command(os.Args[0], "-test.run=^$")
		gc.Env = append(os.Environ(), childModeVar+"=sleeper")
		gc.SysProcAttr = setsidAttr()
		if err := gc.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "starting the grandchild:", err)
			return 1
		}
		if err := os.WriteFile(os.Getenv("GATEWAY_TEST_PIDFILE"), []byte(strconv.Itoa(gc.Process.Pid)), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	if mode == "holder" {
		return runHolder(in, out)
	}
	answered := 0
	for in.Scan() {
		if mode == "hang" || (mode == "mute" && answered > 0) {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || len(m.ID) == 0 || m.Method == "" {
			continue
		}
		var result string
		switch m.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"test-child","version":"1"}}`
		case "ping":
			result = `{}`
		case "tools/list":
			if mode == "slowlist" {
				time.Sleep(slowListDelay)
			}
			result = `{"tools":[{"name":"pid","description":"the server's process id","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			// Tool "ask" first sends its caller a request of the method
			// named in its arguments, and does not wait for the answer.
			var p struct {
				Name      string `json:"name"`
				Arguments struct {
					Method string `json:"method"`
				} `json:"arguments"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Name == "ask" {
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":"ask-%d","method":%s,"params":{}}`+"\n", answered, strconv.Quote(p.Arguments.Method))
			}
			result = fmt.Sprintf(`{"content":[{"type":"text","text":"%d"}]}`, os.Getpid())
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`+"\n", m.ID)
			out.Flush()
			continue
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", m.ID, result)
		out.Flush()
		answered++
	}
	return 0
}

// testChild is a server entry that runs this test binary in mode.
func testChild(t testing.TB, mode string) stdio.ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return stdio.ServerConfig{Command: exe, Args: []string{"-test.run=^$"}, Env: map[string]string{childModeVar: mode}}
}

// runHolder is the holder child: see childModeVar.
func runHolder(in *bufio.Scanner, out *bufio.Writer) int {
	held, cancelled := []json.RawMessage{}, []json.RawMessage{}
	answer := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
	}
	text := func(s string) string {
		return fmt.Sprintf(`{"content":[{"type":"text","text":%s}]}`, strconv.Quote(s))
	}
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Method == "notifications/cancelled":
			cancelled = append(cancelled, m.Params.RequestID)
		case len(m.ID) == 0:
		case m.Method == "initialize":
			answer(m.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"test-holder","version":"1"}}`)
		case m.Method == "tools/call" && m.Params.Name == "wait":
			held = append(held, m.ID)
		case m.Method == "tools/call" && m.Params.Name == "state":
			st, _ := json.Marshal(map[string][]json.RawMessage{"held": held, "cancelled": cancelled})
			answer(m.ID, text(string(st)))
		case m.Method == "tools/call" && m.Params.Name == "release":
			for _, id := range held {
				answer(id, text("released"))
			}
			held = held[:0]
			answer(m.ID, text("released"))
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}`+"\n", m.ID)
		}
		out.Flush()
	}
	return 0
}
