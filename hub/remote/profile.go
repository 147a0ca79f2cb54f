package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	profileaccess "sigs.k8s.io/cluster-inventory-api/pkg/access"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// Providers are the access providers of the administrator's provider file: which credential plugin the
// hub runs for a ClusterProfile that offers access through a provider of that name. The file, not the
// profile, names the program; this is why a profile may bring an exec plugin where a kubeconfig
// Secret may not.
type Providers struct {
	list []profileaccess.Provider
}

// LoadProviders reads and checks a provider file (--clusterprofile-provider-file).
func LoadProviders(path string) (*Providers, error) {
	cfg, err := profileaccess.NewFromFile(path)
	if err != nil {
		return nil, err
	}
	p, err := NewProviders(cfg.Providers)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// NewProviders checks the providers and keeps a copy of them.
func NewProviders(list []profileaccess.Provider) (*Providers, error) {
	seen := map[string]bool{}
	for i, p := range list {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("provider %d has no name", i)
		case seen[p.Name]:
			return nil, fmt.Errorf("provider %s is named twice", p.Name)
		case p.ExecConfig == nil || p.ExecConfig.Command == "":
			return nil, fmt.Errorf("provider %s has no execConfig.command", p.Name)
		case p.ExecConfig.APIVersion != "client.authentication.k8s.io/v1" && p.ExecConfig.APIVersion != "client.authentication.k8s.io/v1beta1":
			return nil, fmt.Errorf("provider %s: execConfig.apiVersion %q is not client.authentication.k8s.io/v1 or v1beta1", p.Name, p.ExecConfig.APIVersion)
		}
		if !slices.Contains([]profileaccess.ProfileSourcedCLIArgsPolicy{"", profileaccess.ProfileSourcedCLIArgsPolicyIgnore, profileaccess.ProfileSourcedCLIArgsPolicyAppend}, p.ProfileSourcedCLIArgsPolicy) {
			return nil, fmt.Errorf("provider %s: unknown profileSourcedCLIArgsPolicy %q", p.Name, p.ProfileSourcedCLIArgsPolicy)
		}
		if !slices.Contains([]profileaccess.ProfileSourcedEnvVarsPolicy{"", profileaccess.ProfileSourcedEnvVarsPolicyIgnore,
			profileaccess.ProfileSourcedEnvVarsPolicyAppendIfNotExists, profileaccess.ProfileSourcedEnvVarsPolicyReplace}, p.ProfileSourcedEnvVarsPolicy) {
			return nil, fmt.Errorf("provider %s: unknown profileSourcedEnvVarsPolicy %q", p.Name, p.ProfileSourcedEnvVarsPolicy)
		}
		seen[p.Name] = true
	}
	return &Providers{list: copyProviders(list)}, nil
}

// Names lists the providers in the order the hub prefers them.
func (p *Providers) Names() []string {
	names := make([]string, len(p.list))
	for i, pr := range p.list {
		names[i] = pr.Name
	}
	return names
}

// copyProviders deep-copies providers: building a config appends the profile's arguments and
// variables to the provider's exec config in place, and they must not pile up from one build to the next.
func copyProviders(list []profileaccess.Provider) []profileaccess.Provider {
	out := make([]profileaccess.Provider, len(list))
	for i, p := range list {
		out[i] = p
		out[i].ExecConfig = p.ExecConfig.DeepCopy()
	}
	return out
}

// ConfigFor builds the client config of a profile through the first of its access providers the file
// names, and a fingerprint of that config. The profile's server goes through the checks a kubeconfig's
// does; a proxy or plain http is refused unless the policy allows insecure access.
func (p *Providers) ConfigFor(profile *inventory.ClusterProfile, policy workerconfig.Policy) (*rest.Config, string, error) {
	provider, cluster := p.accessorOf(profile)
	if provider == "" {
		return nil, "", &workerconfig.ConfigError{Reason: gantry.ReasonNoAccessProvider, Message: fmt.Sprintf(
			"ClusterProfile %s/%s offers access providers [%s]; the hub's provider file names [%s]",
			profile.Namespace, profile.Name, strings.Join(offeredProviders(profile), ", "), strings.Join(p.Names(), ", "))}
	}
	if problem := profileServerProblem(cluster.Server, cluster.ProxyURL, policy); problem != "" {
		return nil, "", &workerconfig.ConfigError{Reason: gantry.ReasonInvalidClusterProfile, Message: fmt.Sprintf(
			"ClusterProfile %s/%s, access provider %s: %s", profile.Namespace, profile.Name, provider, problem)}
	}
	cfg, err := profileaccess.New(copyProviders(p.list)).BuildConfigFromCP(profile)
	if err != nil {
		return nil, "", &workerconfig.ConfigError{Reason: gantry.ReasonInvalidClusterProfile, Message: fmt.Sprintf(
			"ClusterProfile %s/%s, access provider %s: %v", profile.Namespace, profile.Name, provider, err)}
	}
	if cluster.ProxyURL == "" {
		// The library's "no proxy" would also ignore the hub's HTTPS_PROXY, unlike a kubeconfig's.
		cfg.Proxy = nil
	}
	version, err := fingerprint(cfg, cluster.ProxyURL)
	if err != nil {
		return nil, "", err
	}
	return cfg, version, nil
}

// accessorOf picks the access provider the library will use: the first of the file's providers that
// the profile offers, its accessProviders in place of the deprecated credentialProviders.
func (p *Providers) accessorOf(profile *inventory.ClusterProfile) (string, *accessCluster) {
	offered := map[string]*accessCluster{}
	for _, list := range [][]inventory.AccessProvider{profile.Status.CredentialProviders, profile.Status.AccessProviders} {
		for _, ap := range list {
			offered[ap.Name] = &accessCluster{Server: ap.Cluster.Server, ProxyURL: ap.Cluster.ProxyURL}
		}
	}
	for _, pr := range p.list {
		if c, ok := offered[pr.Name]; ok {
			return pr.Name, c
		}
	}
	return "", nil
}

type accessCluster struct {
	Server   string
	ProxyURL string
}

func offeredProviders(profile *inventory.ClusterProfile) []string {
	var names []string
	for _, ap := range append(slices.Clone(profile.Status.AccessProviders), profile.Status.CredentialProviders...) {
		if !slices.Contains(names, ap.Name) {
			names = append(names, ap.Name)
		}
	}
	return names
}

// profileServerProblem says why the hub will not reach a profile's server, or "".
func profileServerProblem(server, proxyURL string, policy workerconfig.Policy) string {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" {
		return fmt.Sprintf("the server %q is not an https:// URL", server)
	}
	if u.User != nil {
		return "the server URL has user information"
	}
	if p := workerconfig.HostProblem(u.Hostname(), policy.AllowLoopback); p != "" {
		return p
	}
	if policy.AllowInsecure {
		return ""
	}
	switch {
	case u.Scheme == "http":
		return "the server " + u.Redacted() + " is http: the plugin's credentials would go in the clear (--allow-insecure-kubeconfigs accepts it)"
	case proxyURL != "":
		return "the profile sends the hub's requests through a proxy (--allow-insecure-kubeconfigs accepts it)"
	}
	return ""
}

// fingerprint changes whenever what the config reaches, or how it authenticates, does.
func fingerprint(cfg *rest.Config, proxyURL string) (string, error) {
	var exec struct {
		Command, APIVersion string
		Args                []string
		Env                 []clientcmdapi.ExecEnvVar
		ProvideClusterInfo  bool
		Config              json.RawMessage
	}
	if e := cfg.ExecProvider; e != nil {
		exec.Command, exec.APIVersion, exec.Args, exec.Env, exec.ProvideClusterInfo = e.Command, e.APIVersion, e.Args, e.Env, e.ProvideClusterInfo
		exec.Config = rawOf(e.Config)
	}
	data, err := json.Marshal(struct {
		Host, ServerName, ProxyURL string
		CAData                     []byte
		Exec                       any
	}{cfg.Host, cfg.ServerName, proxyURL, cfg.CAData, exec})
	if err != nil {
		return "", fmt.Errorf("fingerprinting a ClusterProfile's config: %w", err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

func rawOf(obj runtime.Object) json.RawMessage {
	switch o := obj.(type) {
	case nil:
		return nil
	case *runtime.Unknown:
		return o.Raw
	default:
		data, _ := json.Marshal(o)
		return data
	}
}
