package gwbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// tbxarkModule is TBXark's mcp-proxy, a Go gateway: built from its module
// at run time (go install through the module proxy), never vendored.
const tbxarkModule = "github.com/tbxark/mcp-proxy@latest" // its go.mod spells the owner in lower case

// tbxarkBuildTimeout bounds go install (a first build downloads its
// dependencies).
const tbxarkBuildTimeout = 5 * time.Minute

// tbxarkBinary returns TBXark's mcp-proxy: Options.TBXark if given, else
// the one built into the run's temporary directory by the first call. A
// failed build is an errSkip naming the cause, and is not retried.
func (e *env) tbxarkBinary(ctx context.Context) (string, error) {
	if e.tbxark != "" || e.tbxarkErr != nil {
		return e.tbxark, e.tbxarkErr
	}
	gobin := filepath.Join(e.tmp, "gobin")
	ctx, cancel := context.WithTimeout(ctx, tbxarkBuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCommand(), "install", tbxarkModule)
	cmd.Dir = e.tmp // outside this module: its go.mod plays no part
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOFLAGS=-mod=mod", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 && len(msg) > 300 {
			msg = msg[i+1:]
		}
		e.tbxarkErr = fmt.Errorf("%w: go install %s failed (%v): %s", errSkip, tbxarkModule, err, strings.ReplaceAll(msg, "\n", " "))
		return "", e.tbxarkErr
	}
	e.tbxark = filepath.Join(gobin, "mcp-proxy")
	return e.tbxark, nil
}

// goCommand is the go that runs gwbench's build of TBXark's mcp-proxy: $GO
// (as the Makefile sets it), else go on PATH.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

func launchTBXark(ctx context.Context, e *env) (*instance, error) {
	bin, err := e.tbxarkBinary(ctx)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := map[string]any{
		"mcpProxy": map[string]any{
			"baseURL": "http://" + addr, "addr": addr, "name": "gwbench", "version": "1",
			"type": "streamable-http", "options": map[string]any{"logEnabled": false},
		},
		"mcpServers": map[string]any{
			"everything": map[string]any{"command": e.node, "args": []string{e.entry, "stdio"}},
		},
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	file := filepath.Join(e.tmp, "tbxark.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return nil, err
	}
	inst, err := startHTTP(ctx, []string{bin, "--config", file}, addr)
	if err != nil {
		return nil, err
	}
	inst.url = "http://" + addr + "/everything/mcp"
	// It mounts a server's route only once it has connected to the server.
	if err := waitRoute(ctx, inst.url, inst.proc); err != nil {
		inst.stop()
		return nil, err
	}
	return inst, nil
}

// waitRoute waits until url answers with something other than 404.
func waitRoute(ctx context.Context, url string, p *process) error {
	c := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: time.Second}
	defer c.CloseIdleConnections()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				return nil
			}
		}
		select {
		case <-p.exited:
			return p.exitError()
		case <-ctx.Done():
			return errors.Join(ctx.Err(), fmt.Errorf("%s still answers 404", url))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
