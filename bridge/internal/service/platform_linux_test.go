package service

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	kservice "github.com/kardianos/service"
)

// TestSystemdUnitRenderedByKardianos installs the unit through kardianos's
// own systemd backend, with HOME in a temporary directory and a fake
// systemctl on PATH, and checks the file kardianos writes.
func TestSystemdUnitRenderedByKardianos(t *testing.T) {
	var systemd kservice.System
	for _, s := range kservice.AvailableSystems() {
		if s.String() == systemdPlatform {
			systemd = s
		}
	}
	if systemd == nil {
		t.Fatal("kardianos offers no linux-systemd backend")
	}

	home := t.TempDir()
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("PATH", bin)

	path := "/opt/Browser Bridge/bin/browserbridge"
	s, err := systemd.New(controlOnly{}, Config(path, serveArgs))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Install(); err != nil {
		t.Fatalf("Install: %v", err)
	}

	unitPath := filepath.Join(home, ".config", "systemd", "user", Name+".service")
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatalf("kardianos wrote no user unit: %v", err)
	}
	t.Logf("%s:\n%s", unitPath, unit)
	got := checkSystemdUnit(t, string(unit))
	if want := []string{path, "serve"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ExecStart runs %q, want %q", got, want)
	}
	if !strings.Contains(string(unit), `ExecStart=/opt/Browser\x20Bridge/bin/browserbridge "serve"`+"\n") {
		t.Errorf("ExecStart is not escaped as expected:\n%s", unit)
	}

	log, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
		if !strings.Contains(line, "--user") {
			t.Errorf("systemctl %s: not a --user call", line)
		}
	}
	if !strings.Contains(string(log), "enable --user "+Name+".service") {
		t.Errorf("systemctl calls %q lack enable --user", log)
	}
}

func TestCheckSystemdUser(t *testing.T) {
	noBus := errors.New("systemctl --user: Failed to connect to bus: No medium found")
	for _, tc := range []struct {
		name     string
		platform string
		probe    error
		wantErr  bool
		mention  string
	}{
		{"sysv", "unix-systemv", nil, true, "unix-systemv"},
		{"openrc", "linux-openrc", nil, true, "linux-openrc"},
		{"none", "", nil, true, "none detected"},
		{"systemd without user manager", systemdPlatform, noBus, true, "No medium found"},
		{"systemd with user manager", systemdPlatform, nil, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probed := false
			err := checkSystemdUser(tc.platform, func() error { probed = true; return tc.probe })
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNoUserManager) {
				t.Fatalf("err = %v, want ErrNoUserManager", err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("err = %q, want it to mention %q", err, tc.mention)
			}
			if tc.platform != systemdPlatform && probed {
				t.Error("probed systemctl --user on a system without systemd")
			}
		})
	}
}

func TestValidateCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		args []string
		ok   bool
	}{
		{"plain", "/usr/local/bin/browserbridge", []string{"serve"}, true},
		{"space", "/home/ann/My Apps/browserbridge", []string{"serve"}, true},
		{"unicode", "/home/zoë/bin/browserbridge", []string{"serve"}, true},
		{"percent", "/home/ann/100%/browserbridge", []string{"serve"}, false},
		{"dollar", "/home/$USER/browserbridge", []string{"serve"}, false},
		{"backslash", `/home/ann/a\b/browserbridge`, []string{"serve"}, false},
		{"quote", `/home/ann/"q"/browserbridge`, []string{"serve"}, false},
		{"newline", "/home/ann/a\nb/browserbridge", []string{"serve"}, false},
		{"bad arg", "/usr/bin/browserbridge", []string{"serve", "%h"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := validateCommand(tc.path, tc.args)
			if (err == nil) != tc.ok {
				t.Errorf("validateCommand(%q, %q) = %v, want ok=%v", tc.path, tc.args, err, tc.ok)
			}
		})
	}
}

// TestRefusesWithoutUserManager runs where no systemd user manager answers
// (a container, a CI runner): every action and Status must refuse with the
// user-facing sentence and write nothing, in particular no SysV script in
// /etc/init.d.
func TestRefusesWithoutUserManager(t *testing.T) {
	if err := checkPlatform(); err == nil {
		t.Skip("a systemd user manager is running here; not installing a real service from a test")
	}
	t.Logf("platform %q", kservice.Platform())
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	initScripts := []string{"/etc/init.d/" + Name, "/etc/init/" + Name + ".conf", "/etc/systemd/system/" + Name + ".service"}
	existed := map[string]bool{}
	for _, p := range initScripts {
		_, err := os.Stat(p)
		existed[p] = err == nil
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	for _, action := range []string{ActionInstall, ActionUninstall, ActionStart, ActionStop, ActionRestart} {
		err := Control(action, exe)
		if !errors.Is(err, ErrNoUserManager) {
			t.Errorf("Control(%s) = %v, want ErrNoUserManager", action, err)
			continue
		}
		const advice = "no systemd user manager is running; the native host starts the bridge on demand, and `browserbridge start` starts it without one"
		if !strings.HasPrefix(err.Error(), advice) {
			t.Errorf("Control(%s) error %q does not start with the advice", action, err)
		}
	}
	state, err := Status(exe)
	if !errors.Is(err, ErrNoUserManager) || state != StateUnknown {
		t.Errorf("Status = %v, %v; want unknown, ErrNoUserManager", state, err)
	}

	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("refused install still wrote into HOME: %v", entries)
	}
	for _, p := range initScripts {
		if _, err := os.Stat(p); err == nil && !existed[p] {
			os.Remove(p)
			t.Errorf("refused install wrote %s", p)
		}
	}
}
