// Package gwbench measures MCP stdio gateways: HTTP servers that front one
// stdio MCP server (here @modelcontextprotocol/server-everything) for many
// client sessions. Every target is driven the same way and reported in one
// table: throughput and latency of the echo tool at several session counts,
// replies that reached the wrong session, errors, and the gateway process's
// own memory.
//
// # Load
//
// For each target and each session count N, Run starts the target afresh,
// opens N sessions (initialize, then notifications/initialized), samples the
// gateway's RSS once (idle), then runs one closed loop per session: send
// tools/call echo, wait for its reply, send the next. The first Warmup of
// the loop is not measured; calls that finish within the following Duration
// are. The direct target has no gateway: it keeps N calls in flight on one
// stdio connection to the server, the floor the gateways are compared with.
// The -sdk targets run the same loops with the official Go SDK's client
// (direct-sdk: one client session on the server's stdio, N calls in flight),
// so that a gateway is compared with direct stdio under the same client.
// That client speaks the newest protocol it can: with browserbridge, which
// answers server/discover, the stateless 2026-07-28 (every call a request
// of its own); with direct stdio and TBXark's, which do not, 2025-11-25
// sessions. browserbridge-sdk-session holds it to sessions, so that the
// gateway is also compared in the protocol the others speak.
//
// # CPU and rounds
//
// Each row also reports the CPU time per call of the client (this process),
// the gateway and the servers over the measured window: on a machine whose
// cores the three share, their sum bounds the throughput, and it shows which
// side a difference comes from. With --rounds N every row runs N times
// (rounds outer, so the rows compared run back to back each time) and the
// table gives medians: ratios are always taken within one round.
//
// # Misrouting
//
// Session s sends its k-th JSON-RPC request with id k and, for a call, the
// message "s<s>-c<k>"; the only right reply is id k with the text
// "Echo: s<s>-c<k>". Ids start at 1 in every session, as real clients do, so
// a gateway that mixes sessions up delivers plausible-looking replies. A
// reply counts as misrouted when its text is not the one expected for its
// id, or when its id is not a call the session has in flight. A call
// settles with the first reply carrying its id, as a real client would
// take it; if that reply was somebody else's, the call counts as misrouted,
// not as completed, and its own reply arriving later is ignored.
//
// # Transports
//
// One client serves every HTTP target: a shared http.Transport, Streamable
// HTTP sessions (POST, replies as application/json or text/event-stream) and
// the older HTTP+SSE transport (GET the stream, POST to its endpoint event,
// replies on the stream, routed by id).
package gwbench
