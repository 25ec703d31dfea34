module github.com/browserbridge/browserbridge

go 1.26.8

require (
	github.com/gorilla/websocket v1.5.3
	github.com/kardianos/service v1.3.0
	github.com/modelcontextprotocol/go-sdk v1.8.0
	github.com/sourcegraph/jsonrpc2 v0.2.3
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
	gopkg.in/natefinch/lumberjack.v2 v2.2.1
)

require (
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/segmentio/asm v1.1.3 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.35.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
