// Package memworker is a worker cluster in memory, for the scale harness: an HTTPS server on a loopback
// address answering the part of the Kubernetes API the hub uses on a worker (identity, version,
// health, discovery, access reviews, and create, read, update, patch, delete, list and watch of copies,
// Jobs, capacity reports, namespaces and the hub's lease), with Gantry's agent admitting the copies in
// the same process. The real gantry-hub connects to it as to any worker, through a kubeconfig that holds
// a token of the hub's identity of deploy/worker/hub-access.yaml.
//
// What it leaves out: no validation, defaulting or admission of objects but the namespace's existence,
// no pagination (a list answers every item), JSON merge patches only, no server-side apply, no Events,
// no pods (no kubelet and no Job controller run here: the harness plays the Job controller).
package memworker

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/gantry-dev/gantry/test/testcluster"
)

// Defaults of Options.
const (
	DefaultEventLog         = 1000
	DefaultBookmarkInterval = time.Minute
)

// Options of a server.
type Options struct {
	// Name is the worker's name on the hub; the agent reports under it.
	Name string
	// EventLog bounds the changes kept for watches to resume from: a watch from an older version gets
	// 410 Expired, and its client lists again.
	EventLog int
	// BookmarkInterval is how often watches that ask for bookmarks get one.
	BookmarkInterval time.Duration
}

// Server is one in-memory worker cluster.
type Server struct {
	name       string
	store      *store
	writes     *writeCounter
	http       *http.Server
	host       string
	caPEM      []byte
	adminToken string
	hubToken   string

	stop     chan struct{}
	stopOnce sync.Once
	agent    *agent
}

// Start serves a new, empty worker: the namespaces an API server makes for itself, nothing else.
func Start(o Options) (*Server, error) {
	if o.Name == "" {
		return nil, errors.New("an in-memory worker needs a name")
	}
	if o.EventLog <= 0 {
		o.EventLog = DefaultEventLog
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = DefaultBookmarkInterval
	}
	hub, err := hubUser()
	if err != nil {
		return nil, err
	}
	caPEM, cert, err := certificates(o.Name)
	if err != nil {
		return nil, err
	}
	s := &Server{name: o.Name, store: newStore(o.EventLog), writes: newWriteCounter(), caPEM: caPEM,
		adminToken: newToken(), hubToken: newToken(), stop: make(chan struct{})}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if _, err := s.store.create(namespaces, "", &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": ns}}}); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.host = ln.Addr().String()
	h := &handler{store: s.store, writes: s.writes, host: s.host, stopped: s.stop,
		auth: &authenticator{tokens: map[string]*user{s.adminToken: admin(), s.hubToken: hub}}}
	s.http = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:  log.New(io.Discard, "", 0)} // clients that hang up mid-handshake are no news
	go func() { _ = s.http.ServeTLS(ln, "", "") }()
	go s.bookmarks(o.BookmarkInterval)
	return s, nil
}

func (s *Server) bookmarks(every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.store.bookmarkAll()
		}
	}
}

// Name is the worker's name.
func (s *Server) Name() string { return s.name }

// Config reaches the server as its administrator (every right), for the harness and tests.
func (s *Server) Config() *rest.Config {
	return &rest.Config{Host: "https://" + s.host, BearerToken: s.adminToken, TLSClientConfig: rest.TLSClientConfig{CAData: s.caPEM}}
}

// Kubeconfig is what the hub's registration Secret holds for this worker: the server, its CA data and a
// token of the hub's identity, which holds the rules of deploy/worker/hub-access.yaml and no more.
func (s *Server) Kubeconfig() ([]byte, error) {
	return testcluster.Kubeconfig(&rest.Config{Host: "https://" + s.host, BearerToken: s.hubToken, TLSClientConfig: rest.TLSClientConfig{CAData: s.caPEM}})
}

// Writes counts the mutating requests answered so far, the agent's writes included, whatever their
// outcome.
func (s *Server) Writes() Writes { return s.writes.snapshot() }

// Watches counts the open watches by resource.
func (s *Server) Watches() map[string]int { return s.store.watchCounts() }

// Stop stops the agent, ends every watch and closes the server.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.stop)
		if s.agent != nil {
			s.agent.stop()
		}
		s.store.closeWatches()
		_ = s.http.Close()
	})
}

// WriteKey names the writes of one client (ClientHub, ClientAdmin, ClientAgent), verb (create, update,
// patch, delete) and resource ("workloads", "workloads/status").
type WriteKey struct{ Client, Verb, Resource string }

// Writes are write counts.
type Writes map[WriteKey]int

// Of adds the writes of one client; "" adds everyone's.
func (w Writes) Of(client string) int {
	n := 0
	for k, c := range w {
		if client == "" || k.Client == client {
			n += c
		}
	}
	return n
}

type writeCounter struct {
	mu     sync.Mutex
	counts Writes
}

func newWriteCounter() *writeCounter { return &writeCounter{counts: Writes{}} }

func (c *writeCounter) add(client, verb, resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[WriteKey{Client: client, Verb: verb, Resource: resource}]++
}

func (c *writeCounter) snapshot() Writes {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(Writes, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}
