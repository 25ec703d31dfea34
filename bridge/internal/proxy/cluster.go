package proxy

import (
	"time"

	"github.com/nats-io/nats.go"
)

// ClusterOptions join the proxy to a cluster of proxies over NATS
// (docs/relay.md, "Cluster"): an extension connected to one node and an MCP
// client connected to another work together as on one node. Nil
// Options.Cluster: one process, no NATS in the path.
type ClusterOptions struct {
	// Conn is a connection to the deployment's NATS, with JetStream. The
	// proxy uses it until Shutdown and does not close it. Required.
	Conn *nats.Conn
	// Node names this node, unique in the cluster ([A-Za-z0-9_-], at most
	// 64 characters). Required.
	Node string
	// PresenceTTL is how long a node that stopped heartbeating is still
	// taken for alive; its extensions are gone for the others after it.
	// Heartbeats go out every fifth of it. Default DefaultPresenceTTL.
	PresenceTTL time.Duration
	// Replicas is the JetStream replica count of the cluster's key-value
	// buckets (1 for one NATS server, 3 for a cluster of three). Default 1.
	Replicas int
	// Prefix begins every subject and bucket name of the cluster, so that
	// several deployments can share one NATS. Default "browserbridge".
	Prefix string
}

// DefaultPresenceTTL is ClusterOptions.PresenceTTL's default.
const DefaultPresenceTTL = 5 * time.Second
