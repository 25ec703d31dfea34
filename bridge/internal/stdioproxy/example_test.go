package stdioproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/browserbridge/browserbridge/bridge/internal/stdioproxy"
)

// A script piped into the proxy, as `printf ... | browserbridge stdio`
// would: the messages after initialize wait for its answer, and EOF waits
// for the calls in flight before the session ends.
func ExampleRun() {
	// A stand-in for the bridge: an MCP server over Streamable HTTP.
	server := mcp.NewServer(&mcp.Implementation{Name: "bridge", Version: "1.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echo the text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	defer srv.Close()

	stdin := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}
`)
	var stdout bytes.Buffer
	err := stdioproxy.Run(context.Background(), stdioproxy.Options{Endpoint: srv.URL, Stdin: stdin, Stdout: &stdout})
	fmt.Println("Run:", err)

	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		var m struct {
			ID     int `json:"id"`
			Result struct {
				ServerInfo struct{ Name string }   `json:"serverInfo"`
				Content    []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Println("not JSON:", sc.Text())
			continue
		}
		switch {
		case m.Result.ServerInfo.Name != "":
			fmt.Printf("%d: initialized by %s\n", m.ID, m.Result.ServerInfo.Name)
		case len(m.Result.Content) > 0:
			fmt.Printf("%d: %s\n", m.ID, m.Result.Content[0].Text)
		}
	}
	// Output:
	// Run: <nil>
	// 1: initialized by bridge
	// 2: hello
}
