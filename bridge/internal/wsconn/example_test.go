package wsconn_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/browserbridge/browserbridge/bridge/internal/wsconn"
)

// An echo server and a client, each end a Conn: the server's handler
// upgrades and reads in its own goroutine; the client dials, wraps the
// connection with New and reads until the server's close frame.
func Example() {
	upgrader := &websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := wsconn.Upgrade(upgrader, w, r, nil)
		if err != nil {
			return
		}
		go c.ReadLoop(func(msg []byte) {
			c.Send([]byte("echo: " + string(msg))) // msg is only valid during the call: copied
			c.Close(websocket.CloseNormalClosure, "one is enough")
		}, nil)
	}))
	defer srv.Close()

	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	c := wsconn.New(ws, &wsconn.Options{PingPeriod: 25 * time.Second}) // zero fields: defaults
	c.Send([]byte("hello"))
	err = c.ReadLoop(func(msg []byte) { fmt.Println(string(msg)) }, nil)
	fmt.Println(err)
	<-c.Done()
	// Output:
	// echo: hello
	// websocket: close 1000 (normal): one is enough
}
