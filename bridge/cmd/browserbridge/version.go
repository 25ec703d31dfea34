package main

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/browserbridge/browserbridge/bridge/buildinfo"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/extension"
)

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	if err := parse(newFlags("version", stderr), args); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "browserbridge %s (%s/%s, %s, link protocol %d, extension %s)\n",
		buildinfo.String(), runtime.GOOS, runtime.GOARCH, runtime.Version(), protocol.Version, extension.ID())
	return nil
}
