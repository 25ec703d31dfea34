package httpguard_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/httpguard"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
)

func Example() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); httpguard.IsTooLarge(err) {
			mcphttp.WriteError(w, http.StatusRequestEntityTooLarge, nil, httpguard.CodeRefused, "The request body is too large.")
			return
		}
		io.WriteString(w, "handled")
	})
	h, err := httpguard.New(httpguard.Options{
		ListenAddr:     "127.0.0.1:3456",
		AllowedOrigins: []string{"http://localhost:6274"},
		Token:          "s3cret",
	}, mux)
	if err != nil {
		fmt.Println(err)
		return
	}

	send := func(method, target, host string, header ...string) {
		r := httptest.NewRequest(method, target, strings.NewReader("{}"))
		r.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	send("GET", "/health", "localhost:3456")
	send("POST", "/mcp", "localhost:3456", "Authorization", "Bearer s3cret")
	send("POST", "/mcp", "localhost:3456")
	send("POST", "/mcp", "attacker.example:3456", "Authorization", "Bearer s3cret")
	send("POST", "/mcp", "localhost:3456", "Authorization", "Bearer s3cret", "Origin", "https://attacker.example")
	send("GET", "/sse", "localhost:3456", "Authorization", "Bearer s3cret", "Sec-Fetch-Site", "cross-site")
	// Output:
	// 200 ok
	// 200 handled
	// 401 {"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"This bridge requires a bearer token: send Authorization: Bearer \u003ctoken\u003e, the token set as \"token\" in its config or BROWSERBRIDGE_TOKEN."}}
	// 403 {"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Host header \"attacker.example:3456\" is not this bridge; refusing (DNS rebinding protection)."}}
	// 403 {"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Origin \"https://attacker.example\" may not call this bridge; add it to \"allowed_origins\" in the bridge's config to allow it."}}
	// 403 {"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Sec-Fetch-Site: cross-site: a page of another site may not call this bridge; only pages whose origin is listed in allowed_origins may."}}
}

func ExampleNew_withoutToken() {
	_, err := httpguard.New(httpguard.Options{ListenAddr: "0.0.0.0:3456"}, http.NotFoundHandler())
	fmt.Println(err)
	// Output:
	// httpguard: listen address "0.0.0.0:3456" is not a loopback address, and the bridge refuses to listen beyond loopback without a token: set "token" in the config file or BROWSERBRIDGE_TOKEN in the environment
}
