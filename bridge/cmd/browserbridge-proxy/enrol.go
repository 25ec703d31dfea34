package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/browserbridge/browserbridge/bridge/atomicfile"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy/token"
	"github.com/browserbridge/browserbridge/bridge/relaywire"
)

// secretBytes is the size of the HS256 secret init writes: 256 random bits.
const secretBytes = 32

// defaultDir is where init writes the secret: the per-user config folder.
func defaultDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "browserbridge-proxy")
	}
	return "browserbridge-proxy"
}

// initProxy writes a new secret (0600, in a 0700 folder) and prints the
// next commands. An existing secret is kept unless --force: replacing it
// ends every token and credential signed with it.
func initProxy(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", defaultDir(), "the folder for the secret (and the revoked credentials' file serve keeps)")
	force := fs.Bool("force", false, "replace an existing secret: every token and bridge credential signed with it stops working")
	publicURL := fs.String("public-url", "", "the proxy's public https:// URL, for the commands printed (optional)")
	listen := fs.String("listen", "127.0.0.1:8787", "the address serve will listen on, for the commands printed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("init: unexpected argument %q", fs.Arg(0))
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return fmt.Errorf("init: --dir: %w", err)
	}
	secret := filepath.Join(abs, "secret")
	if _, err := os.Stat(secret); err == nil && !*force {
		return fmt.Errorf("init: %s exists already and is kept: replacing it would end every token and bridge credential signed with it (--force replaces it)", secret)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	var b [secretBytes]byte
	rand.Read(b[:])
	if err := atomicfile.WriteFile(secret, []byte(base64.RawURLEncoding.EncodeToString(b[:])+"\n"), 0o600); err != nil {
		return fmt.Errorf("init: writing the secret: %w", err)
	}
	serveLine := fmt.Sprintf("browserbridge-proxy serve --listen %s --secret-file %s --revoked %s", *listen, secret, filepath.Join(abs, "revoked.json"))
	inviteLine := fmt.Sprintf("browserbridge-proxy invite --secret-file %s", secret)
	if host, _, err := net.SplitHostPort(*listen); err == nil && relaywire.LoopbackHost(host) {
		inviteLine += " --proxy http://" + *listen
	} else if *publicURL != "" {
		inviteLine += " --proxy " + *publicURL
	}
	join := "https://proxy.example.com"
	if *publicURL != "" {
		serveLine += " --public-url " + *publicURL
		inviteLine += " --url " + *publicURL
		join = *publicURL
	}
	fmt.Fprintf(stdout, `wrote a new secret to %s (mode 0600): it signs every credential; keep it private and backed up.

Next:
  1. Run the proxy (on loopback behind a reverse proxy that serves https://, such as Caddy or Traefik;
     or beyond loopback with --tls-cert FILE --tls-key FILE: plain http works only on loopback):
       %s
  2. Invite a person, on this machine:
       %s --user alice
     and give them the one command it prints: browserbridge relay join %s --code …
`, secret, serveLine, inviteLine, join)
	return nil
}

// operatorTTL is the lifetime of the token invite signs its request with.
const operatorTTL = time.Minute

// invite asks the running proxy for an enrolment code bound to --user and
// prints the command the person runs.
func invite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	secret := fs.String("secret-file", filepath.Join(defaultDir(), "secret"), "the proxy's --secret-file")
	user := fs.String("user", "", "the user the code enrols a bridge as (required)")
	proxyURL := fs.String("proxy", "http://127.0.0.1:8787", "where this machine reaches the running proxy: http:// on loopback, else https://")
	publicURL := fs.String("url", "", "the proxy's public https:// URL, for the command printed (default: the proxy's --public-url, else --proxy)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("invite: unexpected argument %q", fs.Arg(0))
	}
	if *user == "" {
		return errors.New("invite: --user is required: the user whose browsers the enrolled bridge offers")
	}
	base, err := relaywire.EnrolBaseURL(*proxyURL)
	if err != nil {
		return fmt.Errorf("invite: --proxy: %w", err)
	}
	keys, err := token.Load(*secret)
	if err != nil {
		return fmt.Errorf("invite: %w (the proxy's --secret-file; browserbridge-proxy init writes one)", err)
	}
	now := time.Now()
	op, err := keys.Mint(token.Claims{Subject: "operator", Kind: token.KindOperator, IssuedAt: now.Unix(), Expires: now.Add(operatorTTL).Unix()})
	if err != nil {
		return fmt.Errorf("invite: %w", err)
	}
	body, _ := json.Marshal(relaywire.EnrolInviteRequest{User: *user})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+relaywire.PathEnrolInvite, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("invite: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+op)
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("invite: the proxy at %s did not answer (is `browserbridge-proxy serve` running there?): %w", base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		var e relaywire.EnrolError
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("invite: the proxy refused: %s", e.Error)
		}
		return fmt.Errorf("invite: the proxy at %s answered %s: is it a browserbridge-proxy of this version?", base, resp.Status)
	}
	var res relaywire.EnrolInviteResult
	if err := json.Unmarshal(data, &res); err != nil {
		return fmt.Errorf("invite: the proxy's answer: %w", err)
	}
	join := *publicURL
	if join == "" {
		join = res.PublicURL
	}
	if join == "" {
		join = base
	}
	exp, _ := time.Parse(time.RFC3339, res.ExpiresAt)
	fmt.Fprintf(stdout, `Enrolment code for %s: %s
It works once, until %s (%s from now).
On %s's computer, with Browser Bridge installed, run:
  browserbridge relay join %s --code %s
`, res.User, res.Code, exp.Local().Format("15:04 MST"), time.Duration(res.TTLSeconds)*time.Second, res.User, join, res.Code)
	return nil
}
