package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/browserbridge/browserbridge/bridge/internal/authserver"
	"github.com/browserbridge/browserbridge/bridge/internal/config"
	"github.com/browserbridge/browserbridge/bridge/internal/mcphttp"
	"github.com/browserbridge/browserbridge/bridge/internal/proxy"
)

// oauthFile is --oauth-config: how people sign in to the proxy's MCP
// endpoints besides pairing codes, and whose browsers each sign-in
// reaches. Decoded strictly: an unknown key is an error.
type oauthFile struct {
	// PasswordHash is a bcrypt hash (`browserbridge gateway
	// hash-password`); the subject of a password sign-in is
	// "password:owner".
	PasswordHash string `json:"password_hash,omitempty"`
	// OIDC is an OpenID Connect provider, as the public gateway's
	// (subjects "oidc:<issuer>#<sub>").
	OIDC *config.OIDC `json:"oidc,omitempty"`
	// Users maps a password or OIDC sign-in's subject to the proxy user
	// (a token's --user) whose browsers and servers it reaches.
	Users map[string]string `json:"users,omitempty"`
	// AllowedOrigins are web origins whose pages may call the endpoints.
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// OAuthLimits bound what anyone can make the sign-in hold or spend
	// before signing in: the keys of the public gateway's oauth section
	// (max_clients, unused_client_ttl, …; docs/limits.md).
	config.OAuthLimits
	// OAuthLifetimes say how long tokens, codes and registrations live:
	// the public gateway's keys too (access_token_ttl, …; docs/limits.md).
	config.OAuthLifetimes
}

// SessionsFileSuffix names the file that keeps the proxy's MCP sessions
// across restarts: --oauth-state's name with it appended (as the public
// gateway's).
const SessionsFileSuffix = ".sessions.json"

// httpOptions builds the proxy's Streamable HTTP side from the flags and
// the environment (BROWSERBRIDGE_OAUTH_PASSWORD, _OIDC_SECRET); closeKV
// releases the state file. A cluster's node passes shared, the state every
// node reads (in JetStream), instead of a state file.
func httpOptions(publicURL, stateFile, configFile string, shared authserver.KV, log *slog.Logger) (*proxy.HTTPOptions, func(), error) {
	base, err := config.NormalizePublicURL(publicURL)
	if err != nil {
		return nil, nil, fmt.Errorf("--public-url: %w", err)
	}
	var f oauthFile
	if configFile != "" {
		if f, err = readOAuthFile(configFile); err != nil {
			return nil, nil, err
		}
	}
	id := authserver.IdentityConfig{PasswordHash: f.PasswordHash, Password: os.Getenv(config.EnvOAuthPassword)}
	if id.PasswordHash != "" && id.Password != "" {
		return nil, nil, fmt.Errorf("--oauth-config's password_hash and %s both set a password; keep one (the hash is the safer)", config.EnvOAuthPassword)
	}
	if o := f.OIDC; o != nil {
		secret := o.ClientSecret
		if env := os.Getenv(config.EnvOAuthOIDCSecret); env != "" {
			secret = env
		}
		id.OIDC = &authserver.OIDCConfig{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret,
			AllowedSubjects: o.AllowedSubjects, AllowedEmails: o.AllowedEmails}
	}
	if (id.PasswordHash != "" || id.Password != "") && f.Users["password:owner"] == "" {
		log.Warn(`a password is set but --oauth-config maps "password:owner" to no user: a password sign-in reaches nothing`)
	}
	if id.OIDC != nil && !hasOIDCUser(f.Users) {
		log.Warn(`an OIDC provider is set but --oauth-config maps no "oidc:<issuer>#<sub>" subject to a user: an OIDC sign-in reaches nothing`)
	}
	ho := &proxy.HTTPOptions{PublicURL: base, Identity: id, Users: f.Users, AllowedOrigins: f.AllowedOrigins,
		Limits: authserver.LimitsFrom(f.OAuthLimits), Lifetimes: f.OAuthLifetimes.Parsed()}
	closeKV := func() {}
	if shared != nil {
		ho.KV = shared
		closeKV = func() { shared.Close() }
	} else if stateFile == "" || stateFile == config.MemoryState {
		log.Warn("the OAuth state is kept in memory: every sign-in is lost when the proxy restarts (--oauth-state keeps it)")
	} else {
		if err := os.MkdirAll(filepath.Dir(stateFile), 0o700); err != nil {
			return nil, nil, fmt.Errorf("--oauth-state's directory: %w", err)
		}
		kv, err := authserver.OpenBoltKV(stateFile, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("--oauth-state %s: %w", stateFile, err)
		}
		// The MCP sessions survive a restart as the sign-ins do, each
		// bound to its user, in a file beside the state.
		sessions, err := mcphttp.OpenFileStore(stateFile+SessionsFileSuffix, mcphttp.FileStoreOptions{TTL: ho.SessionTimeout, Logger: log})
		if err != nil {
			kv.Close()
			return nil, nil, fmt.Errorf("--oauth-state %s: %w", stateFile, err)
		}
		ho.KV, ho.Sessions = kv, sessions
		closeKV = func() {
			if err := sessions.Close(); err != nil {
				log.Warn("writing the MCP session records", "err", err)
			}
			kv.Close()
		}
	}
	return ho, closeKV, nil
}

// readOAuthFile reads and checks --oauth-config.
func readOAuthFile(path string) (oauthFile, error) {
	var f oauthFile
	data, err := os.ReadFile(path)
	if err != nil {
		return f, fmt.Errorf("--oauth-config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("--oauth-config %s: %w", path, err)
	}
	if dec.More() {
		return f, fmt.Errorf("--oauth-config %s: more than one JSON value", path)
	}
	if err := f.OAuthLimits.Validate(""); err != nil {
		return f, fmt.Errorf("--oauth-config %s: %w", path, err)
	}
	if err := f.OAuthLifetimes.Validate(""); err != nil {
		return f, fmt.Errorf("--oauth-config %s: %w", path, err)
	}
	if f.OIDC != nil && len(f.OIDC.AllowedSubjects) == 0 && len(f.OIDC.AllowedEmails) == 0 {
		return f, errors.New(`--oauth-config: "oidc" needs allowed_subjects or allowed_emails: without them anyone with an account at the provider could sign in`)
	}
	for subject, user := range f.Users {
		switch {
		case strings.HasPrefix(subject, "pair:"):
			return f, fmt.Errorf("--oauth-config: users[%q]: a pairing code's sign-in is bound to its user already; map only password and OIDC subjects", subject)
		case subject != "password:owner" && !strings.HasPrefix(subject, "oidc:"):
			return f, fmt.Errorf(`--oauth-config: users[%q]: a subject is "password:owner" or "oidc:<issuer>#<sub>" (the proxy logs the subject of each sign-in)`, subject)
		case strings.TrimSpace(user) == "" || user != strings.TrimSpace(user):
			return f, fmt.Errorf("--oauth-config: users[%q]: the user %q is empty or has white space around it", subject, user)
		}
	}
	return f, nil
}

func hasOIDCUser(users map[string]string) bool {
	for s := range users {
		if strings.HasPrefix(s, "oidc:") {
			return true
		}
	}
	return false
}
