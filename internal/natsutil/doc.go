// Package natsutil starts kvroute's embedded NATS server (loopback, JetStream on) and opens NATS
// client connections that reconnect forever and log their state changes (DESIGN.md §2, §9).
//
// The package is Caddy-free; the kvroute Caddy app, kvroute-sim and kvroute-bridge use it.
package natsutil
