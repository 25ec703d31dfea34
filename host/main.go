// Command browserbridge-host is the native-messaging host Chrome launches
// for the Browser Bridge extension. It pumps frames between the browser's
// stdio and the bridge's Unix socket, starting the bridge if none answers.
//
// Chrome runs it as: browserbridge-host chrome-extension://<id>/ [--parent-window=N]
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ignoreSIGPIPE()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "browserbridge-host:", err)
		os.Exit(1)
	}
}
