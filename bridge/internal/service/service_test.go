package service

import (
	"reflect"
	"strings"
	"testing"
)

func TestStateString(t *testing.T) {
	for st, want := range map[State]string{
		StateRunning:      "running",
		StateStopped:      "stopped",
		StateNotInstalled: "not-installed",
		StateUnknown:      "unknown",
		State(42):         "unknown",
	} {
		if got := st.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int(st), got, want)
		}
	}
}

func TestConfig(t *testing.T) {
	args := []string{"serve"}
	cfg := Config("/usr/local/bin/browserbridge", args)
	args[0] = "changed" // Config must keep its own copy
	if cfg.Name != "browserbridge" || cfg.DisplayName != "Browser Bridge" || cfg.Description == "" {
		t.Errorf("identity = %q, %q, %q", cfg.Name, cfg.DisplayName, cfg.Description)
	}
	if cfg.Executable != "/usr/local/bin/browserbridge" || !reflect.DeepEqual(cfg.Arguments, []string{"serve"}) {
		t.Errorf("command = %q %q", cfg.Executable, cfg.Arguments)
	}
	for k, want := range map[string]any{
		"UserService": true,
		"Restart":     "on-failure",
		"KeepAlive":   true,
		"RunAtLoad":   true,
		"OnFailure":   "restart",
	} {
		if got := cfg.Option[k]; got != want {
			t.Errorf("Option[%s] = %v, want %v", k, got, want)
		}
	}
	for _, k := range []string{"SystemdScript", "LaunchdConfig"} {
		if s, _ := cfg.Option[k].(string); s == "" {
			t.Errorf("Option[%s] is not a template", k)
		}
	}
}

func TestControlUnknownAction(t *testing.T) {
	err := Control("reinstall", "/usr/local/bin/browserbridge")
	if err == nil || !strings.Contains(err.Error(), "use install, uninstall, start, stop or restart") {
		t.Errorf("Control(reinstall) = %v, want the list of actions", err)
	}
}
