package remote

import (
	"errors"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// KubeconfigKey is the Secret data key that holds a worker's kubeconfig.
const KubeconfigKey = "kubeconfig"

// ConfigError is a kubeconfig the hub will not use; Reason is the WorkerCluster condition reason.
type ConfigError struct {
	Reason  string
	Message string
}

func (e *ConfigError) Error() string { return e.Message }

// RESTConfig turns kubeconfig bytes into a REST config. Unless allowInsecure is set, it refuses kubeconfigs
// that would make the hub read its own files or run programs: exec and auth-provider plugins, token files
// and certificate or key files. Such a kubeconfig would let whoever can write the Secret reach the hub's
// file system or run code in it.
func RESTConfig(data []byte, allowInsecure bool) (*rest.Config, error) {
	if len(data) == 0 {
		return nil, &ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: "the Secret has no data key " + KubeconfigKey}
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, &ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: "parsing kubeconfig: " + err.Error()}
	}
	// Checked before validation, which itself reads the files a kubeconfig names.
	if !allowInsecure {
		if problems := insecureParts(cfg); len(problems) > 0 {
			return nil, &ConfigError{Reason: gantry.ReasonInsecureKubeconfig,
				Message: "kubeconfig refused: " + strings.Join(problems, "; ") + " (embed credentials and CA data instead)"}
		}
	}
	if err := clientcmd.Validate(*cfg); err != nil {
		return nil, &ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: "invalid kubeconfig: " + err.Error()}
	}
	restCfg, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, &ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: "building client config: " + err.Error()}
	}
	return restCfg, nil
}

// insecureParts lists what in the kubeconfig reads local files or runs programs. Every user and cluster
// is checked, not only the current context's: validation reads the files of all of them.
func insecureParts(cfg *clientcmdapi.Config) []string {
	var problems []string
	for _, name := range sortedKeys(cfg.AuthInfos) {
		auth := cfg.AuthInfos[name]
		if auth.Exec != nil {
			problems = append(problems, "user "+name+" runs an exec plugin")
		}
		if auth.AuthProvider != nil {
			problems = append(problems, "user "+name+" uses an auth provider plugin")
		}
		if auth.TokenFile != "" {
			problems = append(problems, "user "+name+" reads tokenFile "+auth.TokenFile)
		}
		if auth.ClientCertificate != "" || auth.ClientKey != "" {
			problems = append(problems, "user "+name+" reads a client certificate or key file")
		}
	}
	for _, name := range sortedKeys(cfg.Clusters) {
		if ca := cfg.Clusters[name].CertificateAuthority; ca != "" {
			problems = append(problems, "cluster "+name+" reads certificate-authority file "+ca)
		}
	}
	return problems
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ReasonOf returns the WorkerCluster condition reason for a connection error.
func ReasonOf(err error) string {
	var ce *ConfigError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return gantry.ReasonUnreachable
}

func isNotFound(err error) bool {
	return apierrors.IsNotFound(err)
}
