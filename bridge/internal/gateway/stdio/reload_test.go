//go:build unix

package stdio

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bootChild is echoChild started when the Supervisor starts.
func bootChild(t *testing.T, name string) ServerConfig {
	c := echoChild(t, name)
	c.Start = StartBoot
	return c
}

// with returns c changed by f, c itself untouched.
func with(c ServerConfig, f func(*ServerConfig)) ServerConfig {
	c = cloneConfig(c)
	f(&c)
	return c
}

// mustConn is Conn that fails the test on error.
func mustConn(t *testing.T, s *Supervisor, name string) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := s.Conn(ctx, name)
	if err != nil {
		t.Fatalf("Conn(%q): %v", name, err)
	}
	return c
}

func isDone(c *Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

// processGone reports whether no process has pid any more.
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestReload changes, adds and removes servers under sessions that use
// them, shared and private.
func TestReload(t *testing.T) {
	const extraSecret = "extra-secret-5a4b3c"
	servers := map[string]ServerConfig{
		"keep":   bootChild(t, "keep"),
		"change": bootChild(t, "change"),
		"drop":   bootChild(t, "drop"),
		"tools":  bootChild(t, "tools"),
	}
	s, logs := newSupervisor(t, servers, Options{})
	shared := map[string]*Conn{}
	for name := range servers {
		shared[name] = mustConn(t, s, name)
	}
	private := map[string]*Conn{}
	for _, name := range []string{"keep", "change", "drop"} {
		c, err := s.StartPrivate(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		private[name] = c
	}

	res, err := s.Reload(map[string]ServerConfig{
		"keep":   bootChild(t, "keep"), // an equal copy
		"change": with(servers["change"], func(c *ServerConfig) { c.Env["EXTRA"] = extraSecret }),
		"tools":  with(servers["tools"], func(c *ServerConfig) { c.Tools = &ToolFilter{Deny: []string{"write"}} }),
		"new":    bootChild(t, "new"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := ReloadResult{Added: []string{"new"}, Removed: []string{"drop"}, Restarted: []string{"change"},
		Updated: []string{"tools"}, Unchanged: []string{"keep"}}
	if !reflect.DeepEqual(res, want) {
		t.Fatalf("Reload = %+v, want %+v", res, want)
	}

	t.Run("unchanged keeps its children", func(t *testing.T) {
		for _, c := range []*Conn{shared["keep"], private["keep"]} {
			if isDone(c) {
				t.Fatalf("pid %d ended: %v", c.PID(), c.Err())
			}
			if got := roundTrip(t, c, []byte(`{"id":1}`)); string(got) != `{"id":1}` {
				t.Fatalf("pid %d answered %s", c.PID(), got)
			}
		}
		if c := mustConn(t, s, "keep"); c != shared["keep"] {
			t.Fatalf("Conn gives pid %d, was %d", c.PID(), shared["keep"].PID())
		}
	})
	t.Run("tools only keeps the child", func(t *testing.T) {
		if st, _ := s.State("tools"); st.PID != shared["tools"].PID() || isDone(shared["tools"]) {
			t.Fatalf("state %+v, was pid %d", st, shared["tools"].PID())
		}
		if cfg, _ := s.Config("tools"); cfg.Tools == nil || !slices.Equal(cfg.Tools.Deny, []string{"write"}) {
			t.Fatalf("Config has tools %+v", cfg.Tools)
		}
	})
	t.Run("changed restarts", func(t *testing.T) {
		for _, c := range []*Conn{shared["change"], private["change"]} {
			// Reload returns after stopping them.
			if e, ok := c.Err().(*ExitError); !ok || !e.Stopped {
				t.Fatalf("pid %d: Err() = %v", c.PID(), c.Err())
			}
		}
		old := shared["change"].PID()
		st := waitState(t, s, "change", "new child", func(st State) bool { return st.Status == StatusRunning && st.PID != old })
		if st.Restarts != 0 || st.LastExit == nil || st.LastExit.PID != old {
			t.Fatalf("restarted for its config: %+v", st)
		}
		c := mustConn(t, s, "change")
		if got := roundTrip(t, c, []byte(`{"id":2}`)); string(got) != `{"id":2}` {
			t.Fatalf("new child answered %s", got)
		}
		if cfg, _ := s.Config("change"); cfg.Env["EXTRA"] != extraSecret {
			t.Fatal("Config has the old entry")
		}
	})
	t.Run("removed is gone", func(t *testing.T) {
		for _, c := range []*Conn{shared["drop"], private["drop"]} {
			if !isDone(c) {
				t.Fatalf("pid %d still connected", c.PID())
			}
			if !processGone(c.PID()) {
				t.Fatalf("pid %d still exists", c.PID())
			}
		}
		if _, err := s.Conn(context.Background(), "drop"); !errors.Is(err, ErrUnknownServer) {
			t.Fatalf("Conn: %v", err)
		}
		if _, err := s.StartPrivate(context.Background(), "drop"); !errors.Is(err, ErrUnknownServer) {
			t.Fatalf("StartPrivate: %v", err)
		}
		if _, ok := s.State("drop"); ok {
			t.Fatal("State knows it")
		}
		if _, ok := s.Config("drop"); ok {
			t.Fatal("Config knows it")
		}
	})
	t.Run("added starts", func(t *testing.T) {
		waitState(t, s, "new", "running", func(st State) bool { return st.Status == StatusRunning })
		if got, want := s.Names(), []string{"change", "keep", "new", "tools"}; !slices.Equal(got, want) {
			t.Fatalf("Names() = %v, want %v", got, want)
		}
		var names []string
		for _, st := range s.States() {
			names = append(names, st.Name)
		}
		if !slices.Equal(names, s.Names()) {
			t.Fatalf("States() names %v", names)
		}
	})
	t.Run("logged without env values", func(t *testing.T) {
		out := logs.String()
		for _, line := range []string{
			`msg="stdio server added" server=new`,
			`msg="stdio server removed" server=drop`,
			`msg="stdio server config changed; restarting" server=change changed=[env]`,
			`msg="stdio server config changed; no restart needed" server=tools changed=[tools]`,
		} {
			if !strings.Contains(out, line) {
				t.Errorf("log lacks %s", line)
			}
		}
		if strings.Contains(out, extraSecret) || strings.Contains(out, "tok-9f8e7d6c5b") {
			t.Errorf("env value in the log:\n%s", out)
		}
	})
}

// TestReloadRules covers what each kind of change does to one server's
// shared child.
func TestReloadRules(t *testing.T) {
	tests := []struct {
		name    string
		from    func(*ServerConfig)
		to      func(*ServerConfig)
		used    bool   // a session used the server before the Reload
		want    string // the ReloadResult list it lands in
		samePID bool   // the same child runs on
		after   Status // the status it settles in
	}{
		{name: "args restart", to: func(c *ServerConfig) { c.Args = []string{"-v"} }, used: true, want: "Restarted", after: StatusRunning},
		{name: "command restart", to: func(c *ServerConfig) {
			i := strings.LastIndexByte(c.Command, '/')
			c.Command = c.Command[:i] + "/." + c.Command[i:]
		},
			used: true, want: "Restarted", after: StatusRunning},
		{name: "env restart", to: func(c *ServerConfig) { c.Env["A"] = "1" }, used: true, want: "Restarted", after: StatusRunning},
		{name: "cwd restart", to: func(c *ServerConfig) { c.Cwd = "/" }, used: true, want: "Restarted", after: StatusRunning},
		{name: "per_session restart", to: func(c *ServerConfig) { c.PerSession = true }, used: true, want: "Restarted", after: StatusRunning},
		{name: "tools only", to: func(c *ServerConfig) { c.Tools = &ToolFilter{Allow: []string{"a"}} }, used: true, want: "Updated", samePID: true, after: StatusRunning},
		{name: "start only", to: func(c *ServerConfig) { c.Start = StartBoot }, used: true, want: "Updated", samePID: true, after: StatusRunning},
		{name: "tool order is no change", from: func(c *ServerConfig) { c.Tools = &ToolFilter{Allow: []string{"a", "b"}} },
			to: func(c *ServerConfig) { c.Tools = &ToolFilter{Allow: []string{"b", "a"}} }, used: true, want: "Unchanged", samePID: true, after: StatusRunning},
		{name: "empty and absent are equal", from: func(c *ServerConfig) { c.Args = nil; c.Tools = nil },
			to: func(c *ServerConfig) { c.Args = []string{}; c.Tools = &ToolFilter{}; c.Start = StartLazy }, used: true, want: "Unchanged", samePID: true, after: StatusRunning},
		{name: "lazy unused stays unstarted", to: func(c *ServerConfig) { c.Args = []string{"-v"} }, want: "Restarted", after: StatusStopped},
		{name: "lazy unused turned boot starts", to: func(c *ServerConfig) { c.Start = StartBoot }, want: "Updated", after: StatusRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			from := echoChild(t, "srv")
			if tt.from != nil {
				from = with(from, tt.from)
			}
			s, _ := newSupervisor(t, map[string]ServerConfig{"srv": from}, Options{})
			var old *Conn
			if tt.used {
				old = mustConn(t, s, "srv")
			}
			res, err := s.Reload(map[string]ServerConfig{"srv": with(from, tt.to)})
			if err != nil {
				t.Fatal(err)
			}
			lists := map[string][]string{"Added": res.Added, "Removed": res.Removed, "Restarted": res.Restarted,
				"Updated": res.Updated, "Unchanged": res.Unchanged}
			for list, names := range lists {
				if in := slices.Equal(names, []string{"srv"}); in != (list == tt.want) {
					t.Fatalf("Reload = %+v, want srv in %s only", res, tt.want)
				}
			}
			st := waitState(t, s, "srv", string(tt.after), func(st State) bool {
				return st.Status == tt.after && (old == nil || tt.samePID || st.PID != old.PID())
			})
			if old != nil && tt.samePID && (st.PID != old.PID() || isDone(old)) {
				t.Fatalf("child replaced: %+v, was pid %d (%v)", st, old.PID(), old.Err())
			}
			if old != nil && !tt.samePID && !isDone(old) {
				t.Fatalf("old child pid %d still runs", old.PID())
			}
			if st.Restarts != 0 {
				t.Fatalf("a reload counted as a crash: %+v", st)
			}
			if tt.after == StatusStopped {
				// Time for a wrong start to show: an absence, nothing to wait on.
				time.Sleep(100 * time.Millisecond)
				if st, _ := s.State("srv"); st.Status != StatusStopped {
					t.Fatalf("started without a session: %+v", st)
				}
			}
		})
	}
}

// TestReloadDuringBackoff: a server waiting out a long backoff after a
// crash restarts at once when its config changes.
func TestReloadDuringBackoff(t *testing.T) {
	cfg := bootChild(t, "srv")
	s, _ := newSupervisor(t, map[string]ServerConfig{"srv": cfg}, Options{MinBackoff: time.Hour})
	c := mustConn(t, s, "srv")
	if err := syscall.Kill(c.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "srv", "backoff", func(st State) bool { return st.Status == StatusBackoff })
	if _, err := s.Reload(map[string]ServerConfig{"srv": with(cfg, func(c *ServerConfig) { c.Args = []string{"-v"} })}); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, s, "srv", "running again", func(st State) bool { return st.Status == StatusRunning })
	if st.Restarts != 0 || st.LastExit == nil || st.LastExit.Signal != "SIGKILL" {
		t.Fatalf("after reload: %+v", st)
	}
}

func TestReloadInvalidChangesNothing(t *testing.T) {
	keep := bootChild(t, "keep")
	s, _ := newSupervisor(t, map[string]ServerConfig{"keep": keep}, Options{})
	pid := mustConn(t, s, "keep").PID()
	tests := []struct {
		name    string
		servers map[string]ServerConfig
		wantErr string
	}{
		{"missing command", map[string]ServerConfig{"keep": keep, "bad": {Command: " "}}, "mcpServers.bad.command: missing"},
		{"relative cwd", map[string]ServerConfig{"keep": with(keep, func(c *ServerConfig) { c.Cwd = "work" })}, `mcpServers.keep.cwd: "work" must be an absolute path`},
		{"bad start", map[string]ServerConfig{"keep": with(keep, func(c *ServerConfig) { c.Start = "eager" })}, "mcpServers.keep.start"},
		{"bad env key", map[string]ServerConfig{"keep": with(keep, func(c *ServerConfig) { c.Env["A=B"] = "x" })}, "mcpServers.keep.env: key"},
		{"empty tool name", map[string]ServerConfig{"keep": with(keep, func(c *ServerConfig) { c.Tools = &ToolFilter{Deny: []string{""}} })},
			"mcpServers.keep.tools.deny[0]: empty tool name"},
		{"bad server name", map[string]ServerConfig{"keep": keep, "Bad": {Command: "x"}}, "mcpServers.Bad: bad server name"},
		{"entry under another name", map[string]ServerConfig{"other": keep}, `mcpServers.other: entry named "keep"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Reload(tt.servers)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Reload = %+v, %v; want an error with %q", res, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "tok-9f8e7d6c5b") {
				t.Fatalf("error shows an env value: %v", err)
			}
			if !reflect.DeepEqual(res, ReloadResult{}) {
				t.Fatalf("result %+v with the error", res)
			}
			if got := s.Names(); !slices.Equal(got, []string{"keep"}) {
				t.Fatalf("Names() = %v", got)
			}
			if cfg, _ := s.Config("keep"); len(changedKeys(cfg, keep)) != 0 {
				t.Fatalf("config changed: %v", changedKeys(cfg, keep))
			}
			if st, _ := s.State("keep"); st.PID != pid {
				t.Fatalf("child changed: %+v, was pid %d", st, pid)
			}
		})
	}
}

func TestReloadBeforeStartAndAfterShutdown(t *testing.T) {
	s, err := NewSupervisor(map[string]ServerConfig{"old": bootChild(t, "old")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Reload(map[string]ServerConfig{"new": bootChild(t, "new")})
	if err != nil || !slices.Equal(res.Added, []string{"new"}) || !slices.Equal(res.Removed, []string{"old"}) {
		t.Fatalf("Reload before Start = %+v, %v", res, err)
	}
	s.Start()
	waitState(t, s, "new", "running", func(st State) bool { return st.Status == StatusRunning })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reload(map[string]ServerConfig{}); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Reload after Shutdown: %v", err)
	}
}

// TestChangedKeysCoversEveryField fails when ServerConfig gains a field
// that changedKeys does not compare (so Reload would miss its changes).
func TestChangedKeysCoversEveryField(t *testing.T) {
	base := ServerConfig{Name: "a", Command: "x"}
	typ := reflect.TypeFor[ServerConfig]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch f.Type.Kind() {
		case reflect.String:
			v.SetString(v.String() + "boot") // "boot": a valid change of Start too
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int:
			v.SetInt(3)
		case reflect.Slice:
			v.Set(reflect.ValueOf([]string{"v"}))
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]string{"K": "v"}))
		case reflect.Pointer:
			v.Set(reflect.ValueOf(&ToolFilter{Allow: []string{"t"}}))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", f.Name, f.Type.Kind())
		}
		if len(changedKeys(base, changed)) == 0 {
			t.Errorf("changedKeys misses a change of %s", f.Name)
		}
	}
}

// TestReloadConcurrent runs Reloads against sessions calling every other
// method; run it with -race. Afterwards no child of a removed server may
// be left.
func TestReloadConcurrent(t *testing.T) {
	a, b := bootChild(t, "a"), echoChild(t, "b")
	configs := []map[string]ServerConfig{
		{"a": a, "b": b},
		{"a": with(a, func(c *ServerConfig) { c.Env["GEN"] = "2" })},
		{"a": with(a, func(c *ServerConfig) { c.Env["GEN"] = "2" }), "b": b, "c": echoChild(t, "c")},
		{"a": a, "c": with(echoChild(t, "c"), func(c *ServerConfig) { c.Tools = &ToolFilter{Deny: []string{"x"}} })},
	}
	s, _ := newSupervisor(t, configs[0], Options{StopGrace: 2 * time.Second})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	privB := map[*Conn]bool{}
	// The per-session children below are never closed but by the reloads:
	// between two, they reach their limit (ErrTooManyChildren).
	unexpected := func(what string, err error) {
		if err != nil && !errors.Is(err, ErrUnknownServer) && !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrTooManyChildren) {
			t.Errorf("%s: %v", what, err)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		wg.Go(func() { // a session on the shared child
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				c, err := s.Conn(ctx, name)
				cancel()
				unexpected("Conn", err)
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				if err := c.Send([]byte(`{"id":1}`)); err != nil {
					// A Reload is stopping this child: stdin is closed
					// before Done.
					select {
					case <-c.Done():
					case <-time.After(20 * time.Second):
						t.Errorf("Send to pid %d: %v", c.PID(), err)
					}
					continue
				}
				select {
				case <-c.Incoming():
				case <-c.Done():
				case <-time.After(20 * time.Second):
					t.Errorf("%s: no answer from pid %d", name, c.PID())
				}
			}
		})
	}
	wg.Go(func() { // per-session children
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			c, err := s.StartPrivate(context.Background(), "b")
			unexpected("StartPrivate", err)
			if err == nil {
				mu.Lock()
				privB[c] = true
				mu.Unlock()
			}
		}
	})
	wg.Go(func() { // readers of state
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, n := range s.Names() {
				s.State(n)
				s.Config(n)
			}
			s.States()
			time.Sleep(100 * time.Microsecond)
		}
	})
	for i := range 23 { // ends on configs[3]
		if _, err := s.Reload(configs[(i+1)%len(configs)]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The last config has no b: every private child of b must be gone,
	// even one started while the Reload ran.
	close(stop)
	wg.Wait()
	if len(privB) == 0 {
		t.Error("no private child of b was started")
	}
	for c := range privB {
		if !isDone(c) || !processGone(c.PID()) {
			t.Errorf("private child pid %d of removed server b survives", c.PID())
		}
	}
	if got := s.Names(); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("Names() = %v", got)
	}

	// Reload racing Shutdown: each Reload finishes or sees ErrShutdown.
	done := make(chan struct{})
	reloaded := make(chan struct{}) // closed after the first Reload of the loop
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			if _, err := s.Reload(configs[i%len(configs)]); err != nil {
				if !errors.Is(err, ErrShutdown) {
					t.Errorf("Reload: %v", err)
				}
				return
			}
			if i == 0 {
				close(reloaded)
			}
		}
	}()
	select { // Shutdown meets the loop under way
	case <-reloaded:
	case <-done:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	for _, st := range s.States() {
		if st.PID != 0 || st.Private != 0 {
			t.Errorf("after Shutdown: %+v", st)
		}
	}
}
