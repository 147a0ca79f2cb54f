package remote

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// Access makes the client config of a WorkerCluster from its registration: a kubeconfig Secret or a
// ClusterProfile. Manager's connections and PodLogs' are both made from it, so both refuse the same.
type Access struct {
	// Hub reads the kubeconfig Secrets in Namespace and the hub's kube-system namespace.
	Hub client.Reader
	// Profiles reads the ClusterProfiles in Namespace; nil reads them with Hub.
	Profiles  client.Reader
	Namespace string
	Policy    workerconfig.Policy
	// Providers are the access providers of the hub's provider file; nil when it has none, and then
	// no ClusterProfile can be used.
	Providers *Providers
	// HubHost is where the hub reaches its own API server.
	HubHost string
}

// Target is what a connection to a worker is made from.
type Target struct {
	// Config reaches the worker. It passed Policy's checks; its dialer is not guarded yet.
	Config *rest.Config
	// Version changes whenever Config does: a connection made from another version is remade.
	Version string
	// Hub tells the hub's own API server from the worker's.
	Hub HubIdentity
}

// For returns the Target of the WorkerCluster, or why it has none: a workerconfig.ConfigError whose reason is the
// Connected condition's.
func (a *Access) For(ctx context.Context, wc *gantry.WorkerCluster) (Target, error) {
	var t Target
	var err error
	switch {
	case wc.Spec.ClusterProfileRef != nil:
		t, err = a.fromProfile(ctx, wc.Spec.ClusterProfileRef.Name)
	case wc.Spec.KubeconfigSecretRef != nil:
		t, err = a.fromSecret(ctx, wc.Spec.KubeconfigSecretRef.Name)
	default:
		err = workerconfig.Invalid("the WorkerCluster names neither a kubeconfig Secret nor a ClusterProfile")
	}
	if err != nil {
		return Target{}, err
	}
	if t.Hub, err = ReadHubIdentity(ctx, a.Hub, a.HubHost); err != nil {
		return Target{}, err
	}
	if t.Hub.isHub(t.Config.Host, "") {
		return Target{}, hubError(t.Config.Host)
	}
	return t, nil
}

func (a *Access) fromSecret(ctx context.Context, name string) (Target, error) {
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: a.Namespace, Name: name}
	if err := a.Hub.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return Target{}, &workerconfig.ConfigError{Reason: gantry.ReasonSecretNotFound, Message: "Secret " + key.String() + " not found"}
		}
		return Target{}, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	data, err := workerconfig.FromSecret(&secret)
	if err != nil {
		return Target{}, err
	}
	cfg, err := workerconfig.RESTConfig(data, a.Policy)
	if err != nil {
		return Target{}, err
	}
	return Target{Config: cfg, Version: "secret/" + secret.ResourceVersion}, nil
}

func (a *Access) fromProfile(ctx context.Context, name string) (Target, error) {
	profile, err := a.readProfile(ctx, name)
	if err != nil {
		return Target{}, err
	}
	if c := apimeta.FindStatusCondition(profile.Status.Conditions, inventory.ClusterConditionControlPlaneHealthy); c != nil && c.Status == "False" {
		return Target{}, &workerconfig.ConfigError{Reason: gantry.ReasonClusterUnhealthy, Message: fmt.Sprintf(
			"ClusterProfile %s/%s says the control plane is not healthy (%s: %s)", a.Namespace, name, c.Reason, c.Message)}
	}
	if a.Providers == nil {
		return Target{}, &workerconfig.ConfigError{Reason: gantry.ReasonNoAccessProvider, Message: "the hub was started without " +
			"--clusterprofile-provider-file, so it has no access provider for ClusterProfile " + a.Namespace + "/" + name}
	}
	cfg, version, err := a.Providers.ConfigFor(profile, a.Policy)
	if err != nil {
		return Target{}, err
	}
	return Target{Config: cfg, Version: "profile/" + version}, nil
}

func (a *Access) readProfile(ctx context.Context, name string) (*inventory.ClusterProfile, error) {
	reader := a.Profiles
	if reader == nil {
		reader = a.Hub
	}
	var profile inventory.ClusterProfile
	key := types.NamespacedName{Namespace: a.Namespace, Name: name}
	err := reader.Get(ctx, key, &profile)
	switch {
	case err == nil:
		return &profile, nil
	case apierrors.IsNotFound(err):
		return nil, &workerconfig.ConfigError{Reason: gantry.ReasonClusterProfileNotFound, Message: "ClusterProfile " + key.String() + " not found"}
	case apimeta.IsNoMatchError(err) || runtime.IsNotRegisteredError(err):
		return nil, &workerconfig.ConfigError{Reason: gantry.ReasonClusterProfileNotFound, Message: "the hub's API server does not serve " +
			"ClusterProfiles (" + inventory.GroupVersion.String() + "): install the cluster inventory's CRD there"}
	}
	return nil, fmt.Errorf("reading ClusterProfile %s: %w", key, err)
}
