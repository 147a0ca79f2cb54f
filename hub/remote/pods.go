package remote

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// Pods is read access to the pods of one worker cluster, for the hub's endpoint (kubectl gantry logs).
type Pods interface {
	// List returns the pods in namespace that match selector, read from the worker's API server.
	List(ctx context.Context, namespace string, selector labels.Selector) ([]corev1.Pod, error)
	// Log opens the log of one container of a pod; with opts.Follow it goes on until the container ends
	// or ctx is done. The caller closes it.
	Log(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)
}

// PodLogs opens Pods on workers. It makes connections of its own, apart from Manager's: every hub
// replica serves the endpoint, and a standby holds no connection of Manager's. Each is made from the
// WorkerCluster's kubeconfig Secret under the same Policy and dial guard as Manager's, refuses the hub's
// own cluster as Manager does, and is kept until the Secret changes. It only reads: the hub's rights on
// the worker (ClusterRole gantry-hub-remote-logs) decide what it may read.
type PodLogs struct {
	// Hub reads WorkerClusters, the kubeconfig Secrets in Namespace and the hub's kube-system namespace.
	Hub       client.Reader
	Namespace string
	Policy    Policy
	// HubHost is where the hub reaches its own API server.
	HubHost string

	mu    sync.Mutex
	conns map[string]podConn
}

type podConn struct {
	source string // resourceVersion of the kubeconfig Secret
	pods   Pods
}

// Pods returns read access to the pods of the named WorkerCluster. Its errors say what is wrong with
// the registration: a ConfigError for a kubeconfig the hub will not use.
func (p *PodLogs) Pods(ctx context.Context, cluster string) (Pods, error) {
	var wc gantry.WorkerCluster
	if err := p.Hub.Get(ctx, types.NamespacedName{Name: cluster}, &wc); err != nil {
		return nil, fmt.Errorf("reading WorkerCluster %s: %w", cluster, err)
	}
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: p.Namespace, Name: wc.Spec.KubeconfigSecretRef.Name}
	if err := p.Hub.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &ConfigError{Reason: gantry.ReasonSecretNotFound, Message: "Secret " + key.String() + " not found"}
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	p.mu.Lock()
	c, ok := p.conns[cluster]
	p.mu.Unlock()
	if ok && c.source == secret.ResourceVersion {
		return c.pods, nil
	}
	pods, err := p.dial(ctx, &secret)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		p.conns = map[string]podConn{}
	}
	p.conns[cluster] = podConn{source: secret.ResourceVersion, pods: pods}
	return pods, nil
}

func (p *PodLogs) dial(ctx context.Context, secret *corev1.Secret) (Pods, error) {
	kubeconfig, err := KubeconfigFrom(secret)
	if err != nil {
		return nil, err
	}
	cfg, err := RESTConfig(kubeconfig, p.Policy)
	if err != nil {
		return nil, err
	}
	hub, err := ReadHubIdentity(ctx, p.Hub, p.HubHost)
	if err != nil {
		return nil, err
	}
	if hub.isHub(cfg.Host, "") {
		return nil, hubError(cfg.Host)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20, 40
	// No overall timeout: a followed log lasts as long as the user watches it.
	cfg.Timeout = 0
	guardDial(cfg, p.Policy.AllowLoopback)
	idCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := identify(idCtx, cfg, hub); err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, &ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: err.Error()}
	}
	return workerPods{core}, nil
}

type workerPods struct{ core corev1client.CoreV1Interface }

func (w workerPods) List(ctx context.Context, namespace string, selector labels.Selector) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list, err := w.core.Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (w workerPods) Log(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	return w.core.Pods(namespace).GetLogs(pod, opts).Stream(ctx)
}
