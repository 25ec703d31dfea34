module github.com/browserbridge/browserbridge

go 1.26.8

require (
	github.com/gorilla/websocket v1.5.3
	github.com/kardianos/service v1.3.0
	github.com/sourcegraph/jsonrpc2 v0.2.3
	golang.org/x/sync v0.24.0
	golang.org/x/sys v0.49.0
	gopkg.in/natefinch/lumberjack.v2 v2.2.1
)
