package stdio

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// ReloadResult says what Reload did. Each list is sorted by name.
type ReloadResult struct {
	// Added servers are new; they start per their start mode.
	Added []string
	// Removed servers had their children stopped, shared and per-session;
	// Conn, StartPrivate and State no longer know them.
	Removed []string
	// Restarted servers changed in what their child sees (command, args,
	// env, cwd or per_session). Their children were stopped; the shared
	// one starts again at once with the new config if it had been started
	// or is a boot server (a lazy server never used stays unstarted).
	Restarted []string
	// Updated servers changed only in what the child does not see (tools,
	// start, max_children): their children run on. A lazy server not started yet that
	// becomes a boot server starts now.
	Updated []string
	// Unchanged servers are equal to their current entry.
	Unchanged []string
}

// Reload replaces the configured servers with servers (as from
// ParseServers), touching only what changed; see ReloadResult for what
// happens to each kind of entry. Sessions on unchanged and updated servers
// see nothing: their children keep running with the same pid.
//
// Every entry is checked first, as NewSupervisor does; on an error nothing
// changes and the error names the server and key
// ("mcpServers.memory.cwd: ..."). A restart for a new config is not counted
// in State.Restarts and starts again from the shortest backoff.
//
// Reload returns once the children it stopped have exited (their group
// gets SIGTERM, then SIGKILL after Options.StopGrace); the new children
// may still be starting. After Shutdown it returns ErrShutdown. Reloads are
// serialized; Reload may run concurrently with every other method.
func (s *Supervisor) Reload(servers map[string]ServerConfig) (ReloadResult, error) {
	next, err := checkServers(servers)
	if err != nil {
		return ReloadResult{}, err
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()

	var (
		res    ReloadResult
		stop   []*Conn              // shared children of restarted servers, private ones of restarted and removed
		gone   []*server            // removed servers whose run must end
		hit    = map[*server]bool{} // restarted and removed servers
		events []func()             // log lines, written after the locks
	)
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		return ReloadResult{}, ErrShutdown
	}
	cur := s.snapshot()
	m := make(map[string]*server, len(next))
	for _, name := range sortedKeys(next) {
		cfg := next[name]
		sv, ok := cur[name]
		if !ok {
			sv = s.newServer(cfg)
			if s.started {
				s.launchLocked(sv)
			}
			m[name] = sv
			res.Added = append(res.Added, name)
			events = append(events, func() { s.log.Info("stdio server added", "server", name, "config", cfg) })
			continue
		}
		m[name] = sv
		sv.mu.Lock()
		changed := changedKeys(sv.cfg, cfg)
		switch {
		case len(changed) == 0:
			res.Unchanged = append(res.Unchanged, name)
		case needsRestart(changed):
			sv.cfg = cfg
			sv.gen++
			if sv.conn != nil {
				stop = append(stop, sv.conn)
			}
			if sv.status != StatusStopped {
				// run starts the new config at once: Conn must wait for
				// it rather than return the child being stopped or the
				// error of a backoff that no longer applies.
				sv.setStatusLocked(StatusStarting, func() { sv.pid, sv.conn = 0, nil })
			}
			hit[sv] = true
			res.Restarted = append(res.Restarted, name)
			events = append(events, func() {
				s.log.Info("stdio server config changed; restarting", "server", name, "changed", changed, "config", cfg)
			})
		default:
			sv.cfg = cfg
			res.Updated = append(res.Updated, name)
			events = append(events, func() {
				s.log.Info("stdio server config changed; no restart needed", "server", name, "changed", changed)
			})
		}
		sv.mu.Unlock()
		if len(changed) > 0 {
			select { // wake run: a new gen, or lazy turned boot
			case sv.reload <- struct{}{}:
			default:
			}
		}
	}
	for _, name := range sortedKeys(cur) {
		if _, ok := next[name]; ok {
			continue
		}
		sv := cur[name]
		sv.cancel() // run stops the shared child and returns
		if sv.launched {
			gone = append(gone, sv)
		}
		hit[sv] = true
		res.Removed = append(res.Removed, name)
		events = append(events, func() { s.log.Info("stdio server removed", "server", name) })
	}
	for c, sv := range s.private {
		if hit[sv] {
			stop = append(stop, c)
		}
	}
	s.servers.Store(&m)
	s.mu.Unlock()

	for _, e := range events {
		e()
	}
	var wg sync.WaitGroup
	for _, c := range stop {
		wg.Go(func() { _ = c.Close() })
	}
	for _, sv := range gone {
		wg.Go(func() { <-sv.exited })
	}
	wg.Wait()
	return res, nil
}

// checkServers checks servers as NewSupervisor and Reload take them and
// returns deep copies with Name set. Entries are checked in name order, so
// that of several bad entries the same one is always reported.
func checkServers(servers map[string]ServerConfig) (map[string]ServerConfig, error) {
	out := make(map[string]ServerConfig, len(servers))
	for _, name := range sortedKeys(servers) {
		cfg := cloneConfig(servers[name])
		if cfg.Name == "" {
			cfg.Name = name
		}
		if cfg.Name != name {
			return nil, fmt.Errorf("mcpServers.%s: entry named %q", quoteName(name), cfg.Name)
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		out[name] = cfg
	}
	return out, nil
}

// cloneConfig returns a copy of c sharing no slice, map or pointer with it.
func cloneConfig(c ServerConfig) ServerConfig {
	c.Args = slices.Clone(c.Args)
	c.Env = maps.Clone(c.Env)
	if c.Tools != nil {
		t := ToolFilter{Allow: slices.Clone(c.Tools.Allow), Deny: slices.Clone(c.Tools.Deny)}
		c.Tools = &t
	}
	return c
}

// changedKeys compares two entries field by field and returns the JSON
// keys that differ, in field order (never values: env is secret). The
// comparison is by meaning, not representation: a nil and an empty list or
// map are equal, "" and "lazy" are equal, no tools filter and an empty one
// are equal, and tool lists are compared as sets. Args stay ordered.
func changedKeys(a, b ServerConfig) []string {
	var keys []string
	add := func(differ bool, key string) {
		if differ {
			keys = append(keys, key)
		}
	}
	add(a.Name != b.Name, "name")
	add(a.Command != b.Command, "command")
	add(!slices.Equal(a.Args, b.Args), "args")
	add(!maps.Equal(a.Env, b.Env), "env")
	add(a.Cwd != b.Cwd, "cwd")
	add(a.PerSession != b.PerSession, "per_session")
	add(a.MaxChildren != b.MaxChildren, "max_children")
	add(a.startMode() != b.startMode(), "start")
	var ta, tb ToolFilter
	if a.Tools != nil {
		ta = *a.Tools
	}
	if b.Tools != nil {
		tb = *b.Tools
	}
	add(!sameSet(ta.Allow, tb.Allow) || !sameSet(ta.Deny, tb.Deny), "tools")
	return keys
}

// needsRestart reports whether a change of keys reaches the child: only
// start (when it starts), tools (applied by the gateway) and max_children
// (applied to the next per-session start) do not.
func needsRestart(keys []string) bool {
	for _, k := range keys {
		if k != "start" && k != "tools" && k != "max_children" {
			return true
		}
	}
	return false
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
