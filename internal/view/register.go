package view

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// Endpoint is how the hub reaches a worker's API server: its URL, the CA that signed its certificate,
// and the name that certificate must carry when it is not the URL's host.
type Endpoint struct {
	Server        string
	CAData        []byte
	TLSServerName string
}

// WorkerEndpoint reads the worker's endpoint from the context ctx of cfg (its current context when ctx
// is empty). cfg is a kubeconfig as the loader resolved it, file paths absolute; file names it in
// errors. A CA the kubeconfig names only as a file is read with readFile and embedded, because the hub
// reads no files.
func WorkerEndpoint(cfg *clientcmdapi.Config, ctx, file string, readFile func(string) ([]byte, error)) (Endpoint, error) {
	if ctx == "" {
		ctx = cfg.CurrentContext
	}
	if ctx == "" {
		return Endpoint{}, fmt.Errorf("%s has no current context: pass --worker-context (contexts: %s)", file, keys(cfg.Contexts))
	}
	kc, ok := cfg.Contexts[ctx]
	if !ok {
		return Endpoint{}, fmt.Errorf("%s has no context %q: pass one of %s to --worker-context", file, ctx, keys(cfg.Contexts))
	}
	cl, ok := cfg.Clusters[kc.Cluster]
	if !ok {
		return Endpoint{}, fmt.Errorf("context %s of %s names cluster %q, which %s does not define", ctx, file, kc.Cluster, file)
	}
	where := fmt.Sprintf("cluster %s of %s", kc.Cluster, file)
	u, err := url.Parse(cl.Server)
	switch {
	case err != nil || u.Hostname() == "":
		return Endpoint{}, fmt.Errorf("%s has no server URL (%q): set its server to the worker's https:// address", where, cl.Server)
	case u.Scheme != "https":
		return Endpoint{}, fmt.Errorf("the server %s of %s is not https: the hub sends its token to a worker only over https", u.Redacted(), where)
	case cl.InsecureSkipTLSVerify:
		return Endpoint{}, fmt.Errorf("%s skips TLS verification: the hub verifies the worker's certificate, so give the cluster its CA (certificate-authority-data) instead", where)
	}
	ca := cl.CertificateAuthorityData
	if len(ca) == 0 && cl.CertificateAuthority != "" {
		if ca, err = readFile(cl.CertificateAuthority); err != nil {
			return Endpoint{}, fmt.Errorf("reading the CA file of %s: %w: make it readable, or embed the CA (kubectl config view --raw --flatten)", where, err)
		}
	}
	if len(ca) == 0 {
		return Endpoint{}, fmt.Errorf("%s has no CA: the hub needs the worker's CA to verify its server; add certificate-authority-data "+
			"(kubectl config view --raw --flatten --minify writes a kubeconfig with it embedded)", where)
	}
	if block, _ := pem.Decode(ca); block == nil {
		return Endpoint{}, fmt.Errorf("the CA of %s is not PEM: give the worker's CA certificate", where)
	}
	return Endpoint{Server: cl.Server, CAData: ca, TLSServerName: cl.TLSServerName}, nil
}

func keys[V any](m map[string]V) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		return "none"
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// HubKubeconfig is the kubeconfig the hub reaches the worker name with: the endpoint and a token of the
// user user, embedded; no client certificate, no exec plugin, no file.
func HubKubeconfig(name, user string, ep Endpoint, token string) ([]byte, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: ep.Server, CertificateAuthorityData: ep.CAData, TLSServerName: ep.TLSServerName}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	return clientcmd.Write(*cfg)
}

// HubKubeconfigParts is what a registration Secret's kubeconfig holds: the server and token of its
// current context.
func HubKubeconfigParts(data []byte) (server, token string, err error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return "", "", err
	}
	kc, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return "", "", fmt.Errorf("no current context")
	}
	if cl, ok := cfg.Clusters[kc.Cluster]; ok {
		server = cl.Server
	}
	if ai, ok := cfg.AuthInfos[kc.AuthInfo]; ok {
		token = ai.Token
	}
	return server, token, nil
}

// SameServer says whether two server URLs name the same scheme, host and port.
func SameServer(a, b string) bool {
	na, okA := normalServer(a)
	nb, okB := normalServer(b)
	return okA && okB && na == nb
}

func normalServer(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[scheme]
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	return scheme + "://" + net.JoinHostPort(host, port), true
}

// TokenExpiry reads the expiry (claim exp) of a ServiceAccount token, a JWT, without verifying it.
func TokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0).UTC(), true
}

// RegistrationAction is what register-cluster does for a name, given what the hub holds under it.
type RegistrationAction string

const (
	// Register creates the Secret and the WorkerCluster.
	Register RegistrationAction = "register"
	// Reregister applies the worker's objects again and writes a new token into the Secret; the
	// WorkerCluster stays as it is (cordoned, failover).
	Reregister RegistrationAction = "re-register"
	// Rotate writes a new token into the Secret, nothing else.
	Rotate RegistrationAction = "rotate"
)

// Existing is what the hub holds for a registration before register-cluster changes anything.
type Existing struct {
	// Cluster is the WorkerCluster of the name; nil when there is none.
	Cluster *gantry.WorkerCluster
	// Secret is the Secret the registration writes; nil when there is none.
	Secret *corev1.Secret
	// SecretUsers names the other WorkerClusters whose kubeconfigSecretRef names that Secret.
	SecretUsers []string
}

// DecideRegistration says what register-cluster does for the WorkerCluster name, whose kubeconfig goes
// into the Secret secret and reaches server, or why it must not. A WorkerCluster that exists keeps the
// cluster it reaches: registering another cluster under its name would lose its jobs there.
func DecideRegistration(name, secret, server string, ex Existing, rotate bool) (RegistrationAction, error) {
	wc := ex.Cluster
	switch {
	case len(ex.SecretUsers) > 0:
		return "", fmt.Errorf("Secret %s is the kubeconfig of WorkerCluster %s: register %s under another name, or unregister %s first",
			secret, strings.Join(ex.SecretUsers, ", "), name, strings.Join(ex.SecretUsers, ", "))
	case wc == nil && rotate:
		return "", fmt.Errorf("WorkerCluster %s does not exist, so it has no token to rotate: register it without --rotate", name)
	case wc == nil:
		return Register, nil
	case wc.DeletionTimestamp != nil:
		return "", fmt.Errorf("WorkerCluster %s is being deleted: wait until it is gone, then register it again", name)
	case wc.Spec.ClusterProfileRef != nil:
		return "", fmt.Errorf("WorkerCluster %s already exists and is reached through ClusterProfile %s: "+
			"it follows the fleet's inventory; register the cluster under another name", name, wc.Spec.ClusterProfileRef.Name)
	case wc.Spec.SecretName() != secret:
		return "", fmt.Errorf("WorkerCluster %s already exists and reads its kubeconfig from Secret %s, not %s: "+
			"unregister %s first, or register the cluster under another name", name, wc.Spec.SecretName(), secret, name)
	case ex.Secret == nil && rotate:
		return "", fmt.Errorf("WorkerCluster %s has no Secret %s to rotate: register it without --rotate", name, secret)
	}
	if ex.Secret != nil {
		// A Secret the hub cannot read reaches no cluster: replacing it loses nothing.
		if was, _, err := HubKubeconfigParts(ex.Secret.Data[workerconfig.SecretKey]); err == nil && was != "" && !SameServer(was, server) {
			return "", fmt.Errorf("WorkerCluster %s reaches %s, not %s: to register another cluster under this name, unregister %s first",
				name, was, server, name)
		}
	}
	if rotate {
		return Rotate, nil
	}
	return Reregister, nil
}

// ConnectedHint says what to do about a WorkerCluster's Connected=False reason; empty when the reason
// needs no action or is not known.
func ConnectedHint(reason string) string {
	switch reason {
	case gantry.ReasonSecretNotFound:
		return "the hub has not seen the Secret yet, or it is in another namespace than the hub's"
	case gantry.ReasonInvalidKubeconfig, gantry.ReasonInsecureKubeconfig:
		return "the hub refuses the kubeconfig; the message says why (a loopback server needs the hub's --allow-loopback-workers)"
	case gantry.ReasonUnreachable:
		return "the hub cannot reach the server: it must be reachable from where the hub runs"
	case gantry.ReasonUnauthorized:
		return "the worker refuses the token or grants too little: register the cluster again without --rotate to restore the hub's access there"
	case gantry.ReasonMissingAPI:
		return "install Gantry's CRDs and agent on the worker (the chart with role agent)"
	case gantry.ReasonDuplicateCluster:
		return "another WorkerCluster already registers this cluster: unregister one of them"
	}
	return ""
}

// Leftovers says what stays after unregister-cluster removed the WorkerCluster cluster: workerCleaned
// when it removed the hub's access on the worker too; queues that still list the cluster; running, the
// hub Workloads that still ran there when --force cut the wait short.
func Leftovers(cluster string, workerCleaned bool, queues []gantry.GlobalQueue, running []string) []string {
	kept := "namespace " + gantry.GantryNamespace + ", Gantry's CRDs, the agent, and the Jobs and Workload copies Gantry left there"
	var out []string
	if workerCleaned {
		out = append(out, "on "+cluster+": "+kept+"; the hub's tokens stopped working with its ServiceAccount")
	} else {
		out = append(out, "on "+cluster+": the hub's access (ServiceAccount gantry-hub-remote and its rights), whose token stays "+
			"valid until it expires; "+kept+" (unregister again with --worker-kubeconfig to remove the hub's access)")
	}
	for _, q := range queues {
		if slices.ContainsFunc(q.Spec.Clusters, func(c gantry.ClusterQuota) bool { return c.Name == cluster }) {
			out = append(out, "globalqueue/"+q.Name+" still lists "+cluster+" in spec.clusters: remove it there")
		}
	}
	if len(running) > 0 {
		out = append(out, fmt.Sprintf("Workloads that still ran on %s (%s): their Jobs there go on unwatched, and the hub holds "+
			"their quota, and their hub Jobs if deleted, until %s is registered again", cluster, strings.Join(running, ", "), cluster))
	}
	return out
}
