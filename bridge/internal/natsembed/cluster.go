package natsembed

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// StartCluster starts n clustered servers with JetStream on 127.0.0.1 (for
// tests and benchmarks): named n1…nN, client and route ports chosen free,
// each with its own store under dir, cluster "browserbridge", logging
// nowhere. It returns once the cluster has a JetStream meta leader that
// sees all n servers, so streams and key-value buckets with n replicas can
// be made at once. Shutdown each server when done (dir is the caller's).
//
// A member restarts with Stop and Restart, keeping its ports and store.
func StartCluster(n int, dir string) ([]*Server, error) {
	if n < 2 {
		// A one-server "cluster" never elects a JetStream meta leader
		// that sees all of it: start one server alone with Start.
		return nil, fmt.Errorf("natsembed: a cluster needs at least 2 servers, not %d; start one server alone with Start", n)
	}
	// JetStream in a cluster needs every server's routes before it starts,
	// so the route ports are picked first. Another process may take one
	// between the pick and the bind: that attempt fails and the next picks
	// again.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		servers, err := startCluster(n, dir)
		if err == nil {
			return servers, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func startCluster(n int, dir string) ([]*Server, error) {
	ports, err := freePorts(n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(p)
	}
	var servers []*Server
	fail := func(err error) ([]*Server, error) {
		for _, s := range servers {
			s.Shutdown()
		}
		return nil, err
	}
	for i := range n {
		name := "n" + strconv.Itoa(i+1)
		store := filepath.Join(dir, name)
		if err := os.MkdirAll(store, 0o700); err != nil {
			return fail(fmt.Errorf("natsembed: %w", err))
		}
		s, err := Start(Options{Name: name, Listen: "127.0.0.1:0", StoreDir: store, Cluster: "browserbridge",
			ClusterListen: "127.0.0.1:" + strconv.Itoa(ports[i]), Routes: routes})
		if err != nil {
			return fail(err)
		}
		servers = append(servers, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*DefaultReadyTimeout)
	defer cancel()
	if err := WaitCluster(ctx, servers); err != nil {
		return fail(err)
	}
	return servers, nil
}

// WaitCluster waits until servers (the whole cluster) have a JetStream
// meta leader among them that sees every one of them, and each follows it:
// after a start, or after a member's Restart.
func WaitCluster(ctx context.Context, servers []*Server) error {
	names := make([]string, len(servers))
	for i, s := range servers {
		names[i] = s.Name()
	}
	slices.Sort(names)
	err := waitFor(ctx, func() (bool, error) {
		leader := false
		for _, s := range servers {
			ns, current, err := s.jetStreamCurrent()
			if !current {
				return false, err
			}
			if ns.JetStreamIsLeader() {
				peers := ns.JetStreamClusterPeers()
				slices.Sort(peers)
				leader = slices.Equal(peers, names)
			}
		}
		return leader, nil
	}, fmt.Sprintf("a JetStream meta leader that sees all of %v", names))
	return err
}

// freePorts returns n TCP ports free on 127.0.0.1 a moment ago.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natsembed: finding a free port: %w", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
