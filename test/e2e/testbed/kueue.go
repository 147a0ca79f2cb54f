package testbed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gantry-dev/gantry/test/e2e/testbed/webhookcert"
)

// KueueQueueLabel on a Job names the LocalQueue of Kueue it is submitted to.
const KueueQueueLabel = "kueue.x-k8s.io/queue-name"

// kueueNamespace is the namespace Kueue's configuration names (its events about itself go there).
const kueueNamespace = "kueue-system"

// The paths inside Kueue's container. kueueMetricsCerts is where Kueue v0.17.0's main reads the serving
// certificate of its metrics endpoint from when its own certificate management is off: a path written in
// its code (cmd/kueue/main.go), which no setting moves, and without a certificate there it exits.
const (
	kueueBinary       = "/kueue-controller-manager"
	kueueEtc          = "/etc/kueue/config"
	kueueWebhookCerts = "/etc/kueue/webhook/certs"
	kueueMetricsCerts = "/etc/kueue/metrics/certs"
)

// kueueWebhooks are the webhooks of Kueue's manifests (config/components/webhook) that StartKueue installs:
// those of the kinds the testbed runs (Job, JobSet, RayJob, TrainJob) and of Kueue's own. The others (pods,
// Deployments, StatefulSets, frameworks whose CRDs the workers lack) fail closed for every namespace and
// would refuse what Kueue is not asked to manage.
var kueueWebhooks = map[string]bool{
	"mjob.kb.io": true, "vjob.kb.io": true, "mjobset.kb.io": true, "vjobset.kb.io": true,
	"mrayjob.kb.io": true, "vrayjob.kb.io": true, "mtrainjob.kb.io": true, "vtrainjob.kb.io": true,
	"mworkload.kb.io": true, "vworkload.kb.io": true, "mclusterqueue.kb.io": true, "vclusterqueue.kb.io": true,
	"mresourceflavor.kb.io": true, "vresourceflavor.kb.io": true, "vcohort.kb.io": true,
}

// kueueFieldOwner is the field manager of what StartKueue applies.
const kueueFieldOwner = "gantry-testbed"

// StartKueue runs the Kueue controller manager built by hack/install-tools.sh (tools is its bin dir) on
// the worker: it installs Kueue's CRDs there, starts Kueue as the testbed process kueue-<worker> (which
// hack/dev-down.sh stops too) serving its webhooks on loopback with a certificate of the testbed's, and
// installs the webhook configurations of the kinds the testbed runs, pointed at it. It returns once the
// worker's API server calls Kueue's webhooks. stop removes the webhook configurations, waits until the
// API server no longer calls them (so the worker serves Jobs without Kueue again), and stops Kueue; the
// CRDs, and any Kueue objects left, stay.
//
// Kueue runs under runc, in a container of its own on the host's network, because Kueue v0.17.0 reads its
// metrics certificate from a fixed path under /etc (kueueMetricsCerts): the container has the testbed's
// certificate mounted there, and nothing is written to the host's /etc.
func (tb *Testbed) StartKueue(ctx context.Context, tools, worker string) (stop func() error, err error) {
	w := tb.Worker(worker)
	if w == nil {
		return nil, fmt.Errorf("no worker %s", worker)
	}
	name := "kueue-" + worker
	dir := filepath.Join(tb.Dir, "kueue", worker)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := applyCRDs(ctx, w, filepath.Join(tools, "kueue", "crd")); err != nil {
		return nil, err
	}
	if err := webhookcert.Write(filepath.Join(dir, "certs"), time.Now()); err != nil {
		return nil, fmt.Errorf("making Kueue's webhook certificate: %w", err)
	}
	port, err := tb.writeKueueConfig(worker, filepath.Join(dir, "etc"))
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}}
	if err := w.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	p, err := tb.startKueueContainer(name, filepath.Join(tools, "kueue-controller-manager"), dir)
	if err != nil {
		return nil, err
	}
	configs, err := kueueWebhookConfigurations(filepath.Join(tools, "kueue", "webhook", "manifests.yaml"),
		"https://127.0.0.1:"+strconv.Itoa(port), filepath.Join(dir, "certs", webhookcert.CAFile))
	if err == nil {
		err = applyAll(ctx, w.Client, configs)
	}
	if err == nil {
		err = waitKueueWebhooks(ctx, w, p, tb.logPath(name), true)
	}
	stop = func() error { return tb.stopKueue(w, p, configs) }
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	return stop, nil
}

func (tb *Testbed) logPath(name string) string { return filepath.Join(tb.Dir, "logs", name+".log") }

func (tb *Testbed) stopKueue(w *Cluster, p *Process, configs []*unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, c := range configs {
		if err := w.Client.Delete(ctx, c); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, waitKueueWebhooks(ctx, w, p, tb.logPath(p.Name), false))
	}
	errs = append(errs, p.Stop())
	if err := os.Remove(filepath.Join(tb.Dir, "pids", p.Name+".pid")); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// applyCRDs applies, server-side, every CRD in dir to the cluster and waits until each is Established.
// Server-side, because the Workload CRD (1.4 MB) exceeds what a client-side apply can record in its
// annotation. Kueue's conversion webhook patches (config/components/crd/patches) are left out: every
// Kueue kind is stored as v1beta2, and Kueue and the tests read and write v1beta2 only.
func applyCRDs(ctx context.Context, c *Cluster, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRDs in %s (hack/install-tools.sh copies them there): %v", dir, err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, u)
	}
	if err := applyAll(ctx, c.Client, crds); err != nil {
		return fmt.Errorf("installing Kueue's CRDs on %s: %w", c.Name, err)
	}
	for _, u := range crds {
		if err := waitEstablished(ctx, c.Client, u.GetName()); err != nil {
			return fmt.Errorf("the CRD %s on %s: %w", u.GetName(), c.Name, err)
		}
	}
	return nil
}

func applyAll(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(kueueFieldOwner),
			client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		err := c.Get(ctx, types.NamespacedName{Name: name}, &crd)
		if err == nil {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			err = errors.New("not Established")
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// writeKueueConfig writes into dir Kueue's Configuration and the worker's admin kubeconfig, which its
// container reads from kueueEtc. Its webhook server, metrics and health probes listen on free loopback
// ports; the webhook's is returned.
func (tb *Testbed) writeKueueConfig(worker, dir string) (webhookPort int, err error) {
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return 0, err
		}
	}
	loopback := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	cfg := map[string]any{
		"apiVersion":                 "config.kueue.x-k8s.io/v1beta2",
		"kind":                       "Configuration",
		"namespace":                  kueueNamespace,
		"manageJobsWithoutQueueName": false,
		"leaderElection":             map[string]any{"leaderElect": false},
		"internalCertManagement":     map[string]any{"enable": false},
		"webhook":                    map[string]any{"host": "127.0.0.1", "port": ports[0], "certDir": kueueWebhookCerts},
		"metrics":                    map[string]any{"bindAddress": loopback(ports[1])},
		"health":                     map[string]any{"healthProbeBindAddress": loopback(ports[2])},
		// The visibility server would listen on :8082 of every interface; the testbed has one cluster
		// per Kueue and no topology.
		"featureGates": map[string]bool{"VisibilityOnDemand": false, "MultiKueue": false, "TopologyAwareScheduling": false},
		"integrations": map[string]any{"frameworks": []string{
			"batch/job", "jobset.x-k8s.io/jobset", "ray.io/rayjob", "trainer.kubeflow.org/trainjob"}},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return 0, err
	}
	kubeconfig, err := os.ReadFile(filepath.Join(tb.Dir, worker+".kubeconfig"))
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), data, 0o600); err != nil {
		return 0, err
	}
	return ports[0], os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600)
}

// startKueueContainer runs the binary under runc as the testbed process name, with dir's etc/ and certs/
// mounted where kueueSpec says.
func (tb *Testbed) startKueueContainer(name, binary, dir string) (*Process, error) {
	runc, err := runcPath()
	if err != nil {
		return nil, err
	}
	bundle := filepath.Join(tb.Dir, "containers", name)
	if err := os.RemoveAll(bundle); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(kueueSpec(name, binary, dir), "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		return nil, err
	}
	return tb.Start(name, []string{runc, "--root", tb.runcRoot(), "run", "--bundle", bundle, tb.containerID(name)})
}

// kueueSpec is the OCI runtime configuration of Kueue's container: an empty read-only root with the
// static binary, its configuration and kubeconfig, and the testbed's certificate both where its webhook
// server reads it and at the fixed path of its metrics server; root without capabilities, on the host's
// network (the worker's API server calls the webhooks on loopback).
func kueueSpec(hostname, binary, dir string) *specs.Spec {
	bind := func(src, dst string) specs.Mount {
		return specs.Mount{Destination: dst, Type: "bind", Source: src, Options: []string{"rbind", "ro"}}
	}
	certs := filepath.Join(dir, "certs")
	mounts := append(systemMounts(),
		bind(binary, kueueBinary),
		bind(filepath.Join(dir, "etc"), kueueEtc),
		bind(certs, kueueWebhookCerts),
		bind(certs, kueueMetricsCerts),
		specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777"}})
	none := []string{}
	return &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Args: []string{kueueBinary, "--config", kueueEtc + "/config.yaml", "--kubeconfig", kueueEtc + "/kubeconfig",
				"--zap-log-level=info"},
			Env:             []string{"PATH=/"},
			Cwd:             "/",
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{Bounding: none, Effective: none, Permitted: none},
		},
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Hostname: hostname,
		Mounts:   mounts,
		Linux:    containerLinux(corev1.ResourceRequirements{}),
	}
}

// kueueWebhookConfigurations reads Kueue's webhook configurations from its manifests and keeps the
// webhooks of kueueWebhooks, each calling base + its path and trusting the CA in caFile. The
// configurations are named as Kueue's release names them ("kueue-" before the manifests' names), so they
// never clash with JobSet's own on the worker ("jobset-..."), though both have webhooks named
// mjobset.kb.io and vjobset.kb.io.
func kueueWebhookConfigurations(manifests, base, caFile string) ([]*unstructured.Unstructured, error) {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(manifests)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	kept := 0
	docs := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := docs.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", manifests, err)
		}
		if k := u.GetKind(); k != "MutatingWebhookConfiguration" && k != "ValidatingWebhookConfiguration" {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
		var keep []any
		for _, h := range hooks {
			hook, _ := h.(map[string]any)
			name, _, _ := unstructured.NestedString(hook, "name")
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			if !kueueWebhooks[name] {
				continue
			}
			if path == "" {
				return nil, fmt.Errorf("%s: the webhook %s calls no service path", manifests, name)
			}
			hook["clientConfig"] = map[string]any{"url": base + path, "caBundle": base64.StdEncoding.EncodeToString(ca)}
			keep = append(keep, hook)
		}
		kept += len(keep)
		u.Object["webhooks"] = keep
		u.SetName("kueue-" + u.GetName())
		out = append(out, u)
	}
	if kept != len(kueueWebhooks) {
		return nil, fmt.Errorf("%s has %d of the %d webhooks the testbed installs", manifests, kept, len(kueueWebhooks))
	}
	return out, nil
}

// waitKueueWebhooks waits (bounded) until the worker's API server calls Kueue's Job webhook (called) or no
// longer does (!called): a dry-run Job with a queue name comes back suspended only from the webhook.
// It gives up early when Kueue has exited.
func waitKueueWebhooks(ctx context.Context, w *Cluster, p *Process, logPath string, called bool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		err := probeKueueJobWebhook(ctx, w.Client, called)
		if err == nil {
			return nil
		}
		if called && !p.Running() {
			return fmt.Errorf("the Kueue controller exited (see %s): %w", logPath, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the API server of %s: %w (see %s)", w.Name, err, logPath)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func probeKueueJobWebhook(ctx context.Context, c client.Client, called bool) error {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "kueue-webhook-probe", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{KueueQueueLabel: "kueue-webhook-probe"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "probe", Image: "registry.example/probe:1"}},
		}}},
	}
	if err := c.Create(ctx, job, client.DryRunAll); err != nil {
		if called {
			return err
		}
		return fmt.Errorf("a dry-run Job is refused: %w", err)
	}
	switch suspended := ptr.Deref(job.Spec.Suspend, false); {
	case called && !suspended:
		return errors.New("a dry-run Job with a queue name comes back not suspended: Kueue's webhook is not called yet")
	case !called && suspended:
		return errors.New("a dry-run Job with a queue name comes back suspended: Kueue's webhook is still called")
	}
	return nil
}
