package endpoint

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir, and returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gantry-hub-endpoint"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// serve runs the server on a free loopback port until the test ends, and returns its address, what
// stops it, and a channel closed once Serve returned (with its error in *served).
func serve(t *testing.T, s *Server) (addr string, stop context.CancelFunc, done <-chan struct{}, served *error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	served = new(error)
	go func() {
		*served = s.Serve(ctx, ln)
		close(finished)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return ln.Addr().String(), cancel, finished, served
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })

func TestServerServesTLSWithItsCertificate(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	addr, _, _, _ := serve(t, &Server{Options: Options{CertFile: certFile, KeyFile: keyFile}, Handler: hello})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if body, _ := io.ReadAll(resp.Body); string(body) != "hello" {
		t.Errorf("body %q", body)
	}
	if _, err := (&http.Client{}).Get("https://" + addr + "/"); err == nil {
		t.Error("a client that does not trust the certificate got through")
	}
}

func TestServerRefusesAMissingCertificate(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Options: Options{CertFile: filepath.Join(dir, "none.crt"), KeyFile: filepath.Join(dir, "none.key")}, Handler: hello}
	if err := s.Serve(context.Background(), ln); err == nil {
		t.Fatal("served without its certificate")
	}
}

// Stopping the hub ends the streams it serves, instead of waiting for clients that follow logs.
func TestServerStopsWithOpenStreams(t *testing.T) {
	streaming := make(chan struct{})
	endless := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		close(streaming)
		<-r.Context().Done()
	})
	addr, cancel, done, served := serve(t, &Server{Handler: endless})
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	<-streaming
	start := time.Now()
	cancel()
	select {
	case <-done:
		if *served != nil {
			t.Errorf("Serve: %v", *served)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop")
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("stopping took %s: it waited for the stream", took)
	}
}
