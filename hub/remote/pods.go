package remote

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
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
// WorkerCluster's Target under the same Access and dial guard as Manager's, refuses the hub's own
// cluster as Manager does, and is kept until the Target's version changes. It only reads: the hub's
// rights on the worker (ClusterRole gantry-hub-remote-logs) decide what it may read.
type PodLogs struct {
	// Hub reads WorkerClusters.
	Hub    client.Reader
	Access *Access

	mu    sync.Mutex
	conns map[string]podConn
}

type podConn struct {
	source string // version of the Target
	pods   Pods
}

// Pods returns read access to the pods of the named WorkerCluster. Its errors say what is wrong with
// the registration: a workerconfig.ConfigError for one the hub will not use.
func (p *PodLogs) Pods(ctx context.Context, cluster string) (Pods, error) {
	var wc gantry.WorkerCluster
	if err := p.Hub.Get(ctx, types.NamespacedName{Name: cluster}, &wc); err != nil {
		return nil, fmt.Errorf("reading WorkerCluster %s: %w", cluster, err)
	}
	target, err := p.Access.For(ctx, &wc)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	c, ok := p.conns[cluster]
	p.mu.Unlock()
	if ok && c.source == target.Version {
		return c.pods, nil
	}
	pods, err := p.dial(ctx, target)
	if err != nil {
		return nil, pluginFailure(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		p.conns = map[string]podConn{}
	}
	p.conns[cluster] = podConn{source: target.Version, pods: pods}
	return pods, nil
}

func (p *PodLogs) dial(ctx context.Context, target Target) (Pods, error) {
	cfg := rest.CopyConfig(target.Config)
	cfg.QPS, cfg.Burst = 20, 40
	// No overall timeout: a followed log lasts as long as the user watches it.
	cfg.Timeout = 0
	workerconfig.GuardDial(cfg, p.Access.Policy.AllowLoopback)
	idCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := identify(idCtx, cfg, target.Hub); err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, &workerconfig.ConfigError{Reason: gantry.ReasonInvalidKubeconfig, Message: err.Error()}
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
