package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/browserbridge/browserbridge/bridge/internal/clientconfig"
	"github.com/browserbridge/browserbridge/bridge/internal/cliflags"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/paths"
	"github.com/browserbridge/browserbridge/bridge/protocol"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

const relayUsage = `usage: browserbridge relay join|status|leave [flags]

  join URL --code CODE [--config FILE] [--socket PATH] [--force]
        exchange the enrolment code the proxy's operator gave you for this
        bridge's own credential, write it into the config's "relay", restart
        the bridge and show the relay's state
  status [--config FILE] [--socket PATH]
        the proxy this bridge is joined to, as whom, and each browser's link
  leave [--config FILE] [--socket PATH] [--force]
        revoke the credential at the proxy, take "relay" out of the config
        and restart the bridge (--force: even when the proxy cannot be told)`

// relayWait bounds how long join waits for the relay to connect.
const relayWait = 30 * time.Second

// relayHTTPTimeout bounds each request to the proxy's enrolment endpoints.
const relayHTTPTimeout = 30 * time.Second

func runRelay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return cliflags.Usage(relayUsage)
	}
	switch args[0] {
	case "join":
		return runRelayJoin(ctx, args[1:], stdout, stderr)
	case "status":
		return runRelayStatus(ctx, args[1:], stdout, stderr)
	case "leave":
		return runRelayLeave(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stderr, relayUsage)
		return flag.ErrHelp
	}
	return cliflags.Usage(fmt.Sprintf("unknown action %q; use join, status or leave", args[0]))
}

// relayConfig is the bridge's config file as relay edits it: its path,
// its bytes ("{}" when it does not exist yet) and what they decode to.
type relayConfig struct {
	path string
	data []byte
	cfg  *config.Config
}

func readRelayConfig(cfgPath string) (*relayConfig, error) {
	rc := &relayConfig{path: cfgPath}
	if rc.path == "" {
		p, err := paths.ConfigFile()
		if err != nil {
			return nil, err
		}
		rc.path = p
	}
	data, err := readInput(rc.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		data = []byte("{\n}\n")
	case err != nil:
		return nil, fmt.Errorf("reading the bridge's config: %w", err)
	}
	cfg, err := config.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, cliflags.Usage(fmt.Sprintf("%s: %v (fix the bridge's config first)", rc.path, err))
	}
	rc.data, rc.cfg = data, cfg
	return rc, nil
}

// write checks that the edited document is still a config the bridge
// starts with, then replaces the file (0600: it holds a credential).
func (rc *relayConfig) write(doc []byte) error {
	if _, err := config.Decode(bytes.NewReader(doc)); err != nil {
		return fmt.Errorf("the edited config would not load (%v); %s left as it was", err, rc.path)
	}
	if err := os.MkdirAll(filepath.Dir(rc.path), 0o700); err != nil {
		return err
	}
	if err := writeFileAtomic(rc.path, doc); err != nil {
		return fmt.Errorf("writing %s: %w", rc.path, err)
	}
	return nil
}

func relayFlags(name string, stderr io.Writer) (*flag.FlagSet, *string, *string) {
	fs := newFlags("relay "+name, stderr)
	cfgPath := fs.String("config", "", "the bridge's config file (default: the per-user config.json that serve reads)")
	socket := fs.String("socket", "", "bridge socket (default: per-user, or $BROWSERBRIDGE_SOCKET)")
	return fs, cfgPath, socket
}

func runRelayJoin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfgPath, socket := relayFlags("join", stderr)
	code := fs.String("code", "", "the enrolment code from the proxy's operator (browserbridge-proxy invite)")
	force := fs.Bool("force", false, "join even though the config already has a relay (the old credential is not revoked)")
	// The URL comes first, as the operator's invitation prints it.
	var raw string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		raw, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if raw == "" || *code == "" {
		return cliflags.Usage("give the proxy's URL and the code, as the invitation says: browserbridge relay join https://proxy.example.com --code ABCD-EFGH-JKMN-PQRS")
	}
	base, err := relaywire.EnrolBaseURL(raw)
	if err != nil {
		return cliflags.Usage(err.Error())
	}
	rc, err := readRelayConfig(*cfgPath)
	if err != nil {
		return err
	}
	if rc.cfg.Relay.URL != "" && !*force {
		return cliflags.Usage(fmt.Sprintf("%s already relays to %s: run `%s relay leave` first (or join with --force)", rc.path, rc.cfg.Relay.URL, cliName()))
	}
	var res relaywire.EnrolResult
	if err := enrolPost(ctx, base+relaywire.PathEnrol, "", relaywire.EnrolRequest{Code: *code}, &res); err != nil {
		return err
	}
	relayURL := relaywire.RelayURLFor(base)
	doc, err := clientconfig.SetMember(rc.path, rc.data, "relay", "url", relayURL)
	if err == nil {
		doc, err = clientconfig.SetMember(rc.path, doc, "relay", "token", res.Token)
	}
	if err != nil {
		return fmt.Errorf("editing %s: %w", rc.path, err)
	}
	if err := rc.write(doc); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "enrolled at %s as %s; the bridge's credential (valid until %s) is in %s (\"relay\")\n", base, res.User, day(res.ExpiresAt), rc.path)
	if err := restartForRelay(ctx, *cfgPath, *socket, stdout, stderr); err != nil {
		return err
	}
	st := waitRelay(ctx, *cfgPath, *socket)
	printRelayState(stdout, st, relayURL, res.User)
	fmt.Fprintf(stdout, "Next: run `%s pair` and type its code on the proxy's sign-in page when your MCP client (claude.ai: Settings → Connectors → Add custom connector → %s/mcp) asks you to sign in.\n", cliName(), base)
	return nil
}

func runRelayStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfgPath, socket := relayFlags("status", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	rc, err := readRelayConfig(*cfgPath)
	if err != nil {
		return err
	}
	r := rc.cfg.Relay
	if r.URL == "" {
		fmt.Fprintf(stdout, "relay: off (%s has none); join a proxy with `%s relay join URL --code CODE`\n", rc.path, cliName())
		return nil
	}
	who, until, how := "an unknown user", "", "a token set by hand"
	if c, err := token.Unverified(r.Token); err == nil {
		who, until = c.Subject, time.Unix(c.Expires, 0).UTC().Format(time.DateOnly)
		if c.ID != "" {
			how = "from enrolment"
		}
	}
	fmt.Fprintf(stdout, "relay: %s as %s (credential %s, valid until %s; in %s)\n", r.URL, who, how, until, rc.path)
	st, err := queryStatus(ctx, relaySocket(*cfgPath, *socket))
	if err != nil {
		fmt.Fprintf(stdout, "the bridge is not running (%v): start it with `%s`\n", err, startHint())
		return nil
	}
	printRelayState(stdout, st, r.URL, who)
	return nil
}

func runRelayLeave(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, cfgPath, socket := relayFlags("leave", stderr)
	force := fs.Bool("force", false, "take the relay out of the config even when the proxy cannot be told to revoke the credential")
	if err := parse(fs, args); err != nil {
		return err
	}
	rc, err := readRelayConfig(*cfgPath)
	if err != nil {
		return err
	}
	r := rc.cfg.Relay
	if r.URL == "" {
		fmt.Fprintf(stdout, "relay: off already (%s has none)\n", rc.path)
		return nil
	}
	base, err := enrolBaseOf(r.URL)
	if err == nil {
		var res relaywire.EnrolLeaveResult
		err = enrolPost(ctx, base+relaywire.PathEnrolLeave, r.Token, struct{}{}, &res)
		if err == nil {
			fmt.Fprintf(stdout, "revoked this bridge's credential at %s (user %s)\n", base, res.User)
		}
	}
	if err != nil {
		if !*force {
			return fmt.Errorf("%w; nothing changed here (`%s relay leave --force` takes the relay out of the config all the same, and the credential keeps working at the proxy until it expires)", err, cliName())
		}
		fmt.Fprintf(stderr, "warning: %v; the credential still works at the proxy until it expires\n", err)
	}
	doc := rc.data
	for _, member := range []string{"url", "token", "name", "servers", "replace_servers"} {
		if doc, err = clientconfig.RemoveMember(rc.path, doc, "relay", member); err != nil {
			return fmt.Errorf("editing %s: %w", rc.path, err)
		}
	}
	if err := rc.write(doc); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "took the relay out of %s\n", rc.path)
	if err := restartForRelay(ctx, *cfgPath, *socket, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "relay: off; this bridge's browsers are reached from this machine only")
	return nil
}

// enrolBaseOf is the enrolment base of a relay.url: https:// for wss://,
// http:// for ws:// (on loopback only, as EnrolBaseURL checks).
func enrolBaseOf(relayURL string) (string, error) {
	u := strings.TrimSuffix(strings.TrimSuffix(relayURL, "/"), relaywire.PathExtension)
	switch {
	case strings.HasPrefix(u, "wss://"):
		u = "https://" + strings.TrimPrefix(u, "wss://")
	case strings.HasPrefix(u, "ws://"):
		u = "http://" + strings.TrimPrefix(u, "ws://")
	}
	return relaywire.EnrolBaseURL(u)
}

// enrolPost posts body to an enrolment endpoint and decodes the answer;
// a refusal comes back as the proxy's sentence.
func enrolPost(ctx context.Context, endpoint, bearer string, body, out any) error {
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, relayHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the proxy did not answer at %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		var e relaywire.EnrolError
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("the proxy refused: %s", e.Error)
		}
		return fmt.Errorf("%s answered %s: is that a Browser Bridge proxy (browserbridge-proxy serve)?", endpoint, resp.Status)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the proxy's answer from %s: %w", endpoint, err)
	}
	return nil
}

// restartForRelay restarts the bridge so that it reads the changed relay.
func restartForRelay(ctx context.Context, cfgPath, socket string, stdout, stderr io.Writer) error {
	var args []string
	if cfgPath != "" {
		args = append(args, "--config", cfgPath)
	}
	if socket != "" {
		args = append(args, "--socket", socket)
	}
	return runRestart(ctx, args, stdout, stderr)
}

// relaySocket is the socket of the bridge the config at cfgPath (or the
// per-user one) describes, or --socket: what lifecycle commands use.
func relaySocket(cfgPath, socket string) string {
	if cfg, err := loadConfig(cfgPath, "", socket); err == nil {
		return cfg.Socket
	}
	return socket
}

// waitRelay waits until every relay link of the restarted bridge has
// connected or failed for good, for relayWait at most, and returns the
// last status (nil if the bridge does not answer).
func waitRelay(ctx context.Context, cfgPath, socket string) *protocol.StatusResult {
	sock := relaySocket(cfgPath, socket)
	var last *protocol.StatusResult
	waitUntil(ctx, relayWait, func() bool {
		st, err := queryStatus(ctx, sock)
		if err != nil {
			return false
		}
		last = st
		if len(st.Relay) == 0 {
			return len(st.Browsers) == 0 // no browser to relay yet: nothing to wait for
		}
		for _, r := range st.Relay {
			if r.State != "connected" && r.State != "auth_failed" {
				return false
			}
		}
		return true
	})
	return last
}

// printRelayState says how each browser's link to the proxy stands.
func printRelayState(w io.Writer, st *protocol.StatusResult, relayURL, user string) {
	if st == nil {
		fmt.Fprintln(w, "relay: the bridge does not answer, so its links are unknown; `browserbridge status` shows them once it runs")
		return
	}
	if len(st.Relay) == 0 {
		fmt.Fprintf(w, "relay: %s as %s; no browser is connected to the bridge yet: open your browser and its link to the proxy starts\n", relayURL, user)
		return
	}
	for _, r := range st.Relay {
		line := fmt.Sprintf("relay: browser %q: %s", r.Name, r.State)
		switch {
		case r.State == "connected":
			line += fmt.Sprintf(" to %s as %s (%s)", r.URL, r.UserID, r.ExtensionID)
		case r.Error != "":
			line += ": " + r.Error
		}
		fmt.Fprintln(w, line)
	}
}

// day is the date of an RFC 3339 time, or the text as it is.
func day(rfc3339 string) string {
	if t, err := time.Parse(time.RFC3339, rfc3339); err == nil {
		return t.UTC().Format(time.DateOnly)
	}
	return rfc3339
}
