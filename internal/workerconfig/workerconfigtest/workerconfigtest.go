// Package workerconfigtest holds kubeconfigs and a listener for the tests of the hub's kubeconfig policy
// and of the connections made under it.
package workerconfigtest

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

const (
	// BaseServer is the server Base names.
	BaseServer = "https://worker.example:6443"
	// Base is a kubeconfig the policy accepts: an embedded token and CA data, an https server.
	Base = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://worker.example:6443
    certificate-authority-data: ZmFrZQ==
users:
- name: u
  user:
    token: abc
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`
	// ExecUser is a user that runs a program for its credentials.
	ExecUser = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      interactiveMode: Never"
)

// With returns Base with old replaced by new.
func With(old, new string) string { return strings.Replace(Base, old, new, 1) }

// WithUser returns Base with the user's token replaced by the given lines.
func WithUser(lines string) string { return With("    token: abc", lines) }

// WithServer returns Base with another server URL.
func WithServer(server string) string { return With(BaseServer, server) }

// Listener accepts connections on loopback, counts them and answers in plain text, which a TLS client
// gives up on at once.
type Listener struct {
	net.Listener
	accepted atomic.Int32
}

// Listen starts a Listener, closed when the test ends.
func Listen(t *testing.T) *Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &Listener{Listener: l}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			// Counted before the answer, so a client that got it sees the count.
			cl.accepted.Add(1)
			_, _ = conn.Write([]byte("HTTP/1.0 400 no TLS here\r\n\r\n"))
			_ = conn.Close()
		}
	}()
	return cl
}

// Server is the listener's https URL.
func (l *Listener) Server() string { return "https://" + l.Addr().String() }

// Accepted is how many connections the listener took.
func (l *Listener) Accepted() int32 { return l.accepted.Load() }
