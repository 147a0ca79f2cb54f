package remote

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// HubIdentity tells the hub's own API server from a worker's. Registered as a worker, the hub would
// dispatch to itself and take its own Workloads for copies.
type HubIdentity struct {
	// Host is the URL the hub reaches its own API server at.
	Host string
	// UID is the UID of the hub's kube-system namespace: every connection to a cluster reads the same
	// one, whatever address it dials. Empty when unknown.
	UID types.UID
}

// isHub says whether the server at host, whose kube-system namespace has uid (empty when not read),
// is the hub's own.
func (h HubIdentity) isHub(host string, uid types.UID) bool {
	return (uid != "" && uid == h.UID) || workerconfig.SameServer(host, h.Host)
}

// hubError is the refusal of a kubeconfig whose server is the hub's own.
func hubError(host string) error {
	return workerconfig.Invalid("server %s is the hub's own API server: the hub cannot be its own worker", host)
}

// ReasonOf returns the WorkerCluster condition reason for a connection error.
func ReasonOf(err error) string {
	var ce *workerconfig.ConfigError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	if apierrors.IsUnauthorized(err) {
		return gantry.ReasonUnauthorized
	}
	return gantry.ReasonUnreachable
}

func isNotFound(err error) bool {
	return apierrors.IsNotFound(err)
}

// ReadHubIdentity is how the hub recognises its own cluster: the address it reaches its API server at,
// and the UID of its kube-system namespace, read with hub.
func ReadHubIdentity(ctx context.Context, hub client.Reader, host string) (HubIdentity, error) {
	id := HubIdentity{Host: host}
	var ns corev1.Namespace
	if err := hub.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &ns); err != nil {
		if apierrors.IsNotFound(err) {
			return id, nil // the address alone then
		}
		return id, fmt.Errorf("reading the hub's own namespace %s: %w", metav1.NamespaceSystem, err)
	}
	id.UID = ns.UID
	return id, nil
}
