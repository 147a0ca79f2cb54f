package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// The queues of a run: held jobs queue in heldNS behind a GlobalQueue whose quota one running job per
// worker fills until the drain; probe jobs go through an open queue in probeNS.
const (
	heldNS, probeNS = "held", "probe"
	heldQueue       = "scale-held"
	openQueue       = "scale-open"
)

// fleet is everything one run starts.
type fleet struct {
	o             options
	hubAPI        *apiServer
	workers       []*apiServer
	hub           *process
	agents        []*process
	player        *player
	hubKubeconfig string
	stopPlayer    context.CancelFunc
	submitted     int
	profiling     sync.Mutex // one CPU profile at a time: the hub serves only one
}

func run(ctx context.Context, o options) (*report, error) {
	if o.workers+o.memoryWorkers == 0 {
		return nil, fmt.Errorf("a run needs workers: -workers, -memory-workers or both")
	}
	if o.root == "" {
		o.root = repoRoot()
	}
	if o.logDir == "" {
		dir, err := os.MkdirTemp("", "gantry-scale-")
		if err != nil {
			return nil, err
		}
		o.logDir = dir
	} else if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return nil, err
	}
	if o.profiles != "" {
		if err := os.MkdirAll(o.profiles, 0o755); err != nil {
			return nil, err
		}
	}
	logf("logs in %s", o.logDir)
	r := newReport(o)
	f := &fleet{o: o, player: newPlayer(o.runtime)}
	defer f.stop()
	steps := []struct {
		what string
		do   func(context.Context, *report) error
	}{
		{"starting the API servers", f.startAPIServers},
		{"connecting the hub", f.connect},
		{"filling the queue", f.fill},
		{"restarting the hub", f.restart},
		{"draining the queue", f.drain},
	}
	for _, s := range steps {
		logf("%s", s.what)
		if err := s.do(ctx, r); err != nil {
			return r, fmt.Errorf("%s: %w", s.what, err)
		}
	}
	if u, err := usageOf(f.hub.pid()); err == nil {
		r.peakRSS = u.hwm
	}
	return r, f.player.check()
}

func (f *fleet) stop() {
	if f.stopPlayer != nil {
		f.stopPlayer()
	}
	f.hub.stop()
	for _, a := range f.agents {
		a.stop()
	}
	for _, s := range append([]*apiServer{f.hubAPI}, f.workers...) {
		s.stop()
	}
}

// startAPIServers starts the hub's API server and the workers', real ones then in-memory ones, each
// worker with its nodes and agent, and the player on every worker.
func (f *fleet) startAPIServers(ctx context.Context, r *report) error {
	var err error
	if f.hubAPI, err = startAPIServer(f.o.root, "hub"); err != nil {
		return err
	}
	if f.hubKubeconfig, err = f.hubAPI.writeKubeconfig(f.o.logDir); err != nil {
		return err
	}
	playCtx, cancel := context.WithCancel(context.Background())
	f.stopPlayer = cancel
	for i := range f.o.workers {
		w, err := startAPIServer(f.o.root, fmt.Sprintf("worker-%d", i+1))
		if err != nil {
			return err
		}
		if err := f.addWorker(ctx, playCtx, w, func() error {
			a, err := startAgent(f.o.bin, f.o.logDir, w)
			if err == nil {
				f.agents = append(f.agents, a)
			}
			return err
		}); err != nil {
			return err
		}
	}
	// Numbered on from the real ones: the dispatcher breaks ties between copies admitted in the same
	// second by cluster name, so a name of its own would win or lose them for the kind.
	for i := range f.o.memoryWorkers {
		w, err := startMemoryWorker(fmt.Sprintf("worker-%d", f.o.workers+i+1))
		if err != nil {
			return err
		}
		if err := f.addWorker(ctx, playCtx, w, func() error { return startMemoryAgent(w) }); err != nil {
			return err
		}
	}
	return f.createQueues(ctx)
}

// addWorker gives a worker that started its nodes, its agent and the player.
func (f *fleet) addWorker(ctx, playCtx context.Context, w *apiServer, startAgent func() error) error {
	f.workers = append(f.workers, w)
	if err := prepareWorker(ctx, w, f.o.nodes, f.o.gpus); err != nil {
		return err
	}
	if err := startAgent(); err != nil {
		return err
	}
	return f.player.play(playCtx, w)
}

// real and inMemory are the workers of each kind.
func (f *fleet) real() []*apiServer     { return f.ofKind(false) }
func (f *fleet) inMemory() []*apiServer { return f.ofKind(true) }

func (f *fleet) ofKind(inMemory bool) []*apiServer {
	var out []*apiServer
	for _, w := range f.workers {
		if w.inMemory() == inMemory {
			out = append(out, w)
		}
	}
	return out
}

func names(ws []*apiServer) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.name)
	}
	return out
}

// createQueues makes the namespaces, the held and open GlobalQueues and a Queue for each.
func (f *fleet) createQueues(ctx context.Context) error {
	c := f.hubAPI.client
	for _, ns := range []string{systemNamespace, heldNS, probeNS} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	for _, q := range []struct {
		name, ns string
		gpus     int64
	}{{heldQueue, heldNS, 1}, {openQueue, probeNS, int64(f.o.nodes) * f.o.gpus}} {
		gq := &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: q.name}, Spec: gantry.GlobalQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: q.ns}},
			Clusters:          f.quota(q.gpus),
		}}
		if err := c.Create(ctx, gq); err != nil {
			return err
		}
		if err := c.Create(ctx, &gantry.Queue{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: q.ns},
			Spec: gantry.QueueSpec{GlobalQueue: q.name}}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fleet) quota(gpus int64) []gantry.ClusterQuota {
	var out []gantry.ClusterQuota
	for _, w := range f.workers {
		out = append(out, gantry.ClusterQuota{Name: w.name, Quota: corev1.ResourceList{
			gantry.GPUResource:    *resource.NewQuantity(gpus, resource.DecimalSI),
			corev1.ResourceCPU:    *resource.NewQuantity(gpus, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(gpus<<30, resource.BinarySI),
		}})
	}
	return out
}

// job is a one-pod Job of one GPU as the hub's admission policy leaves it: managed by Gantry, suspended.
func job(ns, name string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{gantry.QueueLabel: "q"}},
		Spec: batchv1.JobSpec{
			ManagedBy: ptr.To(gantry.JobManagedBy), Suspend: ptr.To(true),
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "train", Image: "registry.example/train:v1", Command: []string{"python", "train.py"},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
						gantry.GPUResource:    resource.MustParse("1"),
						corev1.ResourceCPU:    resource.MustParse("1"),
						corev1.ResourceMemory: resource.MustParse("1Gi"),
					}}}},
			}},
		},
	}
}

// submit creates held jobs until n exist, from the clients in parallel.
func (f *fleet) submit(ctx context.Context, n int) error {
	names := make(chan string)
	errs := make(chan error, f.o.clients)
	var wg sync.WaitGroup
	for range f.o.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				if err := f.hubAPI.client.Create(ctx, job(heldNS, name)); err != nil {
					errs <- fmt.Errorf("submitting %s: %w", name, err)
					return
				}
			}
		}()
	}
	var err error
feed:
	for ; f.submitted < n; f.submitted++ {
		select {
		case names <- fmt.Sprintf("held-%06d", f.submitted):
		case err = <-errs:
			break feed
		}
	}
	close(names)
	wg.Wait()
	if err != nil {
		return err
	}
	select {
	case err = <-errs:
	default:
	}
	return err
}

// count returns how many objects of the list's kind are in the namespace, from one page of one item.
func count(ctx context.Context, c client.Client, list client.ObjectList, ns string) (int, error) {
	if err := c.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
		return 0, err
	}
	items := apimeta.LenList(list)
	return items + int(ptr.Deref(list.GetRemainingItemCount(), 0)), nil
}
