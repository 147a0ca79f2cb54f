// Package endpoint is the hub's HTTP endpoint for users: the logs of a job's pods, streamed from the
// worker the job runs on (kubectl gantry logs), so users need no credentials for workers; what waits,
// with its positions (hub/visibility); the hub's page (hub/web). Each
// request carries the user's bearer token for the hub; the hub's API server says who it is
// (TokenReview) and what they may read (SubjectAccessReview), so the endpoint shows nothing the hub's
// RBAC does not let the user read.
package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/hub/visibility"
)

// Options are where and how the endpoint listens: gantry-hub's --endpoint-* flags.
type Options struct {
	// BindAddress is host:port; empty leaves the endpoint off.
	BindAddress string
	// CertFile and KeyFile are the serving certificate and its key, PEM, both or neither; they are read
	// again when they change. Without them the endpoint serves plain HTTP, on a loopback address only.
	CertFile, KeyFile string
	// Page serves the hub's page (hub/web) on the endpoint too, with its login form.
	Page bool
}

// Check refuses options the endpoint must not serve with: plain HTTP would carry users' tokens in the
// clear to anyone on the network.
func (o Options) Check() error {
	if o.BindAddress == "" {
		if o.CertFile != "" || o.KeyFile != "" {
			return errors.New("--endpoint-tls-cert-file and --endpoint-tls-key-file serve the endpoint, which is off without --endpoint-bind-address")
		}
		if o.Page {
			return errors.New("--endpoint-page serves the page on the endpoint, which is off without --endpoint-bind-address")
		}
		return nil
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("--endpoint-tls-cert-file and --endpoint-tls-key-file go together: give both or neither")
	}
	if _, _, err := net.SplitHostPort(o.BindAddress); err != nil {
		return fmt.Errorf("--endpoint-bind-address %q: %w (want host:port, such as 127.0.0.1:8443 or :8443)", o.BindAddress, err)
	}
	if o.CertFile == "" && !loopback(o.BindAddress) {
		return fmt.Errorf("--endpoint-bind-address %s is not a loopback address, and without TLS users' tokens would cross the network in the clear: "+
			"give --endpoint-tls-cert-file and --endpoint-tls-key-file, or bind to 127.0.0.1", o.BindAddress)
	}
	return nil
}

// loopback says whether a host:port listens on loopback only. An empty host or a name other than
// localhost may listen anywhere.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Config is what the endpoint's pages need of the hub.
type Config struct {
	// Reviews checks users' tokens with the hub's API server.
	Reviews authenticationv1client.TokenReviewInterface
	// Logs serves the logs of jobs.
	Logs *Logs
	// Page, when set, is the hub's page (hub/web), served behind Authenticate with a login form for
	// browsers; SecureCookies marks the session cookie for HTTPS.
	Page          http.Handler
	SecureCookies bool
	// Visibility, when set, serves what waits with its positions and what-if requests (apis/visibility/v1beta1).
	Visibility *visibility.Handler
}

// NewHandler routes the endpoint's pages, every one behind Authenticate.
func NewHandler(c Config) http.Handler {
	authenticated := http.NewServeMux()
	authenticated.Handle("GET /logs/{namespace}/{job}", c.Logs)
	if c.Visibility != nil {
		c.Visibility.Register(authenticated)
	}
	if c.Page == nil {
		return Authenticate(c.Reviews, authenticated)
	}
	authenticated.Handle("/", c.Page)
	mux := http.NewServeMux()
	login := Login(c.Reviews, c.SecureCookies)
	mux.Handle("/login", login)
	mux.Handle("/logout", login)
	// The login form's stylesheet is the page's; the page's assets are public.
	mux.Handle("GET /static/", c.Page)
	mux.Handle("/", Authenticate(c.Reviews, authenticated))
	return mux
}

// Server serves the endpoint on every hub replica, the standby too: it reads, and needs no lease.
type Server struct {
	Options
	Handler http.Handler
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *Server) NeedLeaderElection() bool { return false }

// Start listens on BindAddress and serves until ctx is done.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.BindAddress)
	if err != nil {
		return fmt.Errorf("the endpoint cannot listen on %s: %w", s.BindAddress, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln, with TLS when CertFile is set, until ctx is done; then streams end with ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	log := ctrllog.FromContext(ctx).WithName("endpoint")
	srv := &http.Server{
		Handler:           s.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// Requests end with the hub: followed logs would otherwise hold shutdown.
		BaseContext: func(net.Listener) context.Context { return ctrllog.IntoContext(ctx, log) },
	}
	scheme := "http"
	if s.CertFile != "" {
		watcher, err := certwatcher.New(s.CertFile, s.KeyFile)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("the endpoint's certificate: %w", err)
		}
		go func() {
			if err := watcher.Start(ctx); err != nil {
				log.Error(err, "Watching the endpoint's certificate stopped")
			}
		}()
		ln = tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate})
		scheme = "https"
	}
	log.Info("Serving the endpoint", "address", scheme+"://"+ln.Addr().String())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(stop); err != nil {
		_ = srv.Close()
	}
	return nil
}
