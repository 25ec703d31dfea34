// Package mcphttp is what every MCP-over-HTTP endpoint of the bridge agrees
// on, written once: the header names, the Accept and Content-Type rules, the
// MCP-Protocol-Version check, the body of an error answer, and server-sent
// events (the writer, with the SDK's event ids, and the reader). The JSON-RPC
// error codes are in its sub-package rpccode, which imports nothing, so
// that the relay's wire package (relaywire) can use them and stay a
// standard-library leaf. The bridge's own endpoints (mcpserver), the stdio
// gateway (gateway), the cloud proxy's Streamable HTTP endpoint (proxy) and
// the gateway benchmark's clients (gwbench) use it; mcphttp imports only the
// standard library, rpccode and sessionlimit.
//
// A session's streams, shared by the gateway and the proxy: [Outbox] is the
// replayable event log of a session's GET stream (ids, a replay budget of
// delivered events, one stream at a time, [Outbox.Pump] writes it),
// [AttachGET] the GET's attach / 409 / Last-Event-ID part, and
// [ResponseQueue] a POST's answer queue (notifications bounded, the response
// itself never dropped).
//
// The protocol versions, for every endpoint: [Versions] (the go-sdk's
// list), [Negotiate] (what initialize answers), [IsStateless] (the one
// rule for "is this the stateless era": the version is 2026-07-28 or
// later), [IsStatelessRequest] and [CheckStandardHeaders] (a stateless
// request's Mcp-Method and Mcp-Name against its body).
//
// The session engine: [Server] serves Streamable HTTP (POST, the GET
// stream, DELETE, the stateless era's one-request sessions) and legacy
// HTTP+SSE to a [Target], the seam an endpoint fills with what it serves
// (Open, Request, Notification, Response, Close, Discover). The Server
// keeps the session table: admission through sessionlimit, begin/end
// around each request (a session being served is never evicted or
// reaped), idle reaping; a POST's answer is a [PostSink]. [Message] is the
// head every endpoint reads of a message (id, method, raw params). The
// gateway's routes and the cloud proxy's endpoints are its targets; what an
// endpoint adds (a body budget, its own parser, per-message refusals, an
// owner per session, node-prefixed ids) goes in through ServerOptions
// hooks and optional Target interfaces ([Gate], [Busy]), never as the
// endpoint's own types. docs/protocol.md ("One session engine") draws the
// flow.
//
// # Negotiation (docs/protocol.md, "MCP over HTTP")
//
//   - A Streamable HTTP POST must accept both application/json and
//     text/event-stream: [Accepts] reads every Accept header value, each
//     comma-separated media range of each, ignores parameters (q-values
//     included, so "text/event-stream;q=0" counts), compares without case,
//     and takes application/* and text/* for their type and */* for both.
//     A POST without Accept accepts neither. This is the rule of the
//     go-sdk's Streamable HTTP server (v1.8.0, streamableAccepts), which the
//     bridge's fast path must match exactly; a test holds the two together.
//   - A GET that opens a stream must accept text/event-stream, by the same
//     reading.
//   - A posted body's Content-Type must be application/json, parameters
//     (charset) allowed.
//   - An MCP-Protocol-Version header, when present, must name a version the
//     endpoint speaks; none means 2025-03-26.
//
// Each check that fails answers the request itself, with the HTTP status of
// the rule (406, 415, 400) and a JSON-RPC error body ([WriteError]) whose
// message says what was wrong and what was received.
package mcphttp
