// Package workerconfig is the hub's policy for the kubeconfigs it reaches workers with: what it parses,
// and what it refuses before anything is read, run or dialed. kubectl-gantry checks a kubeconfig with
// it before it registers a worker, so the hub does not refuse it later.
package workerconfig

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// SecretKey is the Secret data key that holds a worker's kubeconfig.
const SecretKey = "kubeconfig"

// MaxBytes is the largest kubeconfig the hub parses. The API server caps a Secret at 1 MiB
// already; the check keeps the parser's cost bounded whatever the bytes came from.
const MaxBytes = 1 << 20

// ConfigError is a kubeconfig the hub will not use, or whose credentials the worker refuses or grants
// too little (reason Unauthorized); Reason is the WorkerCluster condition reason.
type ConfigError struct {
	Reason  string
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

// Invalid is the refusal of a kubeconfig the hub cannot use (reason InvalidKubeconfig).
func Invalid(format string, args ...any) *ConfigError {
	return &ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: fmt.Sprintf(format, args...)}
}

// Policy says which kubeconfigs the hub accepts besides those that embed their credentials and CA data
// and name an https server that verifies its certificate.
type Policy struct {
	// AllowInsecure lifts every InsecureKubeconfig refusal: files and programs, and transports that
	// leak or give away credentials. Whoever may write the Secret can then run code in the hub.
	AllowInsecure bool
	// AllowLoopback accepts servers on loopback addresses (127.0.0.0/8, ::1, localhost).
	AllowLoopback bool
}

// FromSecret returns the kubeconfig a registration Secret holds, or why it holds none.
func FromSecret(secret *corev1.Secret) ([]byte, error) {
	data, ok := secret.Data[SecretKey]
	switch {
	case !ok:
		return nil, Invalid("Secret %s/%s has no data key %s", secret.Namespace, secret.Name, SecretKey)
	case len(bytes.TrimSpace(data)) == 0:
		return nil, Invalid("data key %s of Secret %s/%s is empty", SecretKey, secret.Namespace, secret.Name)
	}
	return data, nil
}

// RESTConfig turns kubeconfig bytes into a REST config without reading a file, running a program or
// dialing anything. Unless the policy allows it, it refuses kubeconfigs that would make the hub read
// its own files or run programs (whoever can write the Secret would reach the hub's file system or run
// code in it), that send credentials in the clear or to a third party, or that act as someone else.
// Servers that no worker can be at (link-local, unspecified, and unless allowed loopback addresses)
// are refused too: they would point the hub at services on its own host or at cloud metadata.
func RESTConfig(data []byte, p Policy) (*rest.Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, Invalid("the kubeconfig is empty")
	}
	if len(data) > MaxBytes {
		return nil, Invalid("the kubeconfig has %d bytes, more than the %d the hub reads", len(data), MaxBytes)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, Invalid("parsing kubeconfig: %v", err)
	}
	// Checked before validation, which itself reads the files a kubeconfig names.
	if !p.AllowInsecure {
		if problems := insecureParts(cfg); len(problems) > 0 {
			return nil, &ConfigError{Reason: gantry.ReasonInsecureKubeconfig,
				Message: "kubeconfig refused: " + strings.Join(problems, "; ") +
					" (embed the token or client certificate and the CA data, and name an https server)"}
		}
	}
	if problems := serverProblems(cfg, p.AllowLoopback); len(problems) > 0 {
		return nil, Invalid("kubeconfig refused: %s", strings.Join(problems, "; "))
	}
	if err := clientcmd.Validate(*cfg); err != nil {
		return nil, Invalid("invalid kubeconfig: %v", err)
	}
	restCfg, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, Invalid("building client config: %v", err)
	}
	return restCfg, nil
}

// insecureParts lists what in the kubeconfig reads local files, runs programs, weakens the transport or
// changes who the hub acts as. Every user and cluster is checked, not only the current context's:
// validation reads the files of all of them.
func insecureParts(cfg *clientcmdapi.Config) []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthInfos)) {
		problems = append(problems, userProblems(name, cfg.AuthInfos[name])...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		problems = append(problems, clusterProblems(name, cfg.Clusters[name])...)
	}
	return problems
}

func userProblems(name string, auth *clientcmdapi.AuthInfo) []string {
	var problems []string
	add := func(bad bool, what string) {
		if bad {
			problems = append(problems, "user "+name+" "+what)
		}
	}
	add(auth.Exec != nil, "runs an exec plugin")
	add(auth.AuthProvider != nil, "uses an auth provider plugin")
	add(auth.TokenFile != "", "reads tokenFile "+auth.TokenFile)
	add(auth.ClientCertificate != "" || auth.ClientKey != "", "reads a client certificate or key file")
	add(auth.Username != "" || auth.Password != "", "uses basic authentication (username/password)")
	// Impersonation makes the hub act, with that user's rights, as someone its credentials are not.
	add(auth.Impersonate != "" || auth.ImpersonateUID != "" || len(auth.ImpersonateGroups) > 0 || len(auth.ImpersonateUserExtra) > 0,
		"impersonates (as, as-uid, as-groups, as-user-extra)")
	return problems
}

func clusterProblems(name string, c *clientcmdapi.Cluster) []string {
	var problems []string
	add := func(bad bool, what string) {
		if bad {
			problems = append(problems, "cluster "+name+" "+what)
		}
	}
	add(c.CertificateAuthority != "", "reads certificate-authority file "+c.CertificateAuthority)
	add(c.InsecureSkipTLSVerify, "skips TLS verification (insecure-skip-tls-verify)")
	// A proxy sees the hub's requests to the worker and chooses where they go.
	add(c.ProxyURL != "", "sends its requests through proxy-url")
	if u, err := url.Parse(c.Server); err == nil {
		add(u.Scheme == "http", "sends credentials in the clear (server "+u.Redacted()+" is http)")
		// Credentials in the URL end up in logs and in condition messages.
		add(u.User != nil, "has user information in its server URL")
	}
	return problems
}

// serverProblems lists servers that are no URL, or that name an address no worker can be at.
func serverProblems(cfg *clientcmdapi.Config, allowLoopback bool) []string {
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Clusters)) {
		server := cfg.Clusters[name].Server
		if server == "" {
			continue // validation reports it
		}
		u, err := url.Parse(server)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
			problems = append(problems, "cluster "+name+": the server must be an https:// URL")
			continue
		}
		if p := HostProblem(u.Hostname(), allowLoopback); p != "" {
			problems = append(problems, "cluster "+name+": "+p)
		}
	}
	return problems
}

// HostProblem says why a worker cannot be at host, a DNS name or an IP address.
func HostProblem(host string, allowLoopback bool) string {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		if allowLoopback {
			return ""
		}
		return "server " + host + " is a loopback name (--allow-loopback-workers accepts it)"
	}
	addr, err := netip.ParseAddr(name)
	if err != nil {
		// A top-level domain is never numeric: such a host is an address in a form that resolvers
		// read differently (127.1, 0177.0.0.1, 2130706433).
		labels := strings.Split(name, ".")
		if isNumericLabel(labels[len(labels)-1]) {
			return "server " + host + " is not an IP address in canonical form"
		}
		return ""
	}
	if p := addrProblem(addr, allowLoopback); p != "" {
		return "server " + host + " is " + p
	}
	return ""
}

func isNumericLabel(s string) bool {
	digits := "0123456789"
	if rest, ok := strings.CutPrefix(s, "0x"); ok {
		s, digits = rest, "0123456789abcdef"
	}
	return s != "" && strings.Trim(s, digits) == ""
}

// addrProblem says what addr is when no worker can be there.
func addrProblem(addr netip.Addr, allowLoopback bool) string {
	addr = addr.Unmap()
	switch {
	case addr.IsUnspecified():
		return "an unspecified address"
	case addr.IsLinkLocalUnicast():
		return "a link-local address (cloud metadata services live there)"
	case addr.IsMulticast():
		return "a multicast address"
	case addr.IsLoopback() && !allowLoopback:
		return "a loopback address (--allow-loopback-workers accepts it)"
	}
	return ""
}

// GuardDial makes connections to cfg's server refuse, as they are dialed, an address hostProblem
// refuses: the check of the kubeconfig sees only the name, which may resolve anywhere. Connections to
// other hosts (a proxy from the hub's environment) are left alone.
func GuardDial(cfg *rest.Config, allowLoopback bool) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return // client-go refuses it
	}
	server := u.Hostname()
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	guarded := *plain
	guarded.Control = func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return err
		}
		if p := addrProblem(ap.Addr(), allowLoopback); p != "" {
			return Invalid("server %s resolves to %s, %s", server, ap.Addr(), p)
		}
		return nil
	}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(address); err == nil && strings.EqualFold(host, server) {
			return guarded.DialContext(ctx, network, address)
		}
		return plain.DialContext(ctx, network, address)
	}
}

// SameServer says whether two server URLs name the same host and port.
func SameServer(a, b string) bool {
	ha, okA := hostPort(a)
	hb, okB := hostPort(b)
	return okA && okB && ha == hb
}

// hostPort normalises a server URL, or a bare host:port as rest.Config allows, to host:port.
func hostPort(server string) (string, bool) {
	if !strings.Contains(server, "://") {
		server = "https://" + server
	}
	u, err := url.Parse(server)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if addr, err := netip.ParseAddr(host); err == nil {
		host = addr.Unmap().String()
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return net.JoinHostPort(host, port), true
}
