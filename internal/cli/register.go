package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	nsmanifest "github.com/gantry-dev/gantry/deploy/namespace"
	workermanifest "github.com/gantry-dev/gantry/deploy/worker"
	"github.com/gantry-dev/gantry/dispatch"
	"github.com/gantry-dev/gantry/internal/manifest"
	"github.com/gantry-dev/gantry/internal/view"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// fieldManager owns what kubectl gantry applies on workers.
const fieldManager = "kubectl-gantry"

// workerClient reaches a worker cluster; tests give a fake one.
var workerClient = func(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: Scheme()})
}

// pollInterval is how often the commands look at the hub while they wait.
var pollInterval = time.Second

// newRegistrationCommands are register-cluster and unregister-cluster.
func newRegistrationCommands(o *Options) []*cobra.Command {
	return []*cobra.Command{newRegisterCommand(o), newUnregisterCommand(o)}
}

type registerFlags struct {
	kubeconfig, context string
	ttl, wait           time.Duration
	rotate              bool
}

func newRegisterCommand(o *Options) *cobra.Command {
	f := &registerFlags{}
	cmd := &cobra.Command{
		Use:   "register-cluster NAME --worker-kubeconfig FILE",
		Short: "Register a worker cluster: the hub's access on it, a token, the Secret and the WorkerCluster on the hub",
		Long: `register-cluster makes a cluster a worker of the hub. On the worker, reached with --worker-kubeconfig,
it applies namespace gantry-system and the hub's least-privilege access (ServiceAccount gantry-hub-remote and
its rights) and mints a token of that ServiceAccount that expires after --token-ttl. On the hub (the usual
kubeconfig flags) it writes Secret NAME-kubeconfig in gantry-system, a kubeconfig with the worker's server, its
CA and the token and nothing else, and the WorkerCluster NAME; then it waits until the hub is connected.

Registering an existing NAME again applies the worker's objects again and writes a new token; the
WorkerCluster keeps its settings. A NAME that reaches another cluster is refused. --rotate only writes a new
token into the Secret. Tokens cannot be renewed: rotate before the expiry it prints.

Gantry's CRDs and agent must be installed on the worker too (the chart with role agent).`,
		Example: `  kubectl gantry register-cluster worker-3 --worker-kubeconfig worker-3.kubeconfig
  kubectl gantry register-cluster worker-3 --worker-kubeconfig admin.kubeconfig --worker-context worker-3 --token-ttl 2160h
  kubectl gantry register-cluster worker-3 --worker-kubeconfig worker-3.kubeconfig --rotate   # a new token, nothing else`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return register(cmd.Context(), o, f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "worker-kubeconfig", "", "Kubeconfig of the worker cluster, with rights to create its namespace, ServiceAccount and RBAC objects.")
	fs.StringVar(&f.context, "worker-context", "", "Context of --worker-kubeconfig (default: its current context).")
	fs.DurationVar(&f.ttl, "token-ttl", 720*time.Hour, "How long the hub's token is valid; the worker's API server may grant less.")
	fs.DurationVar(&f.wait, "wait", 2*time.Minute, "How long to wait for the hub to connect; 0 does not wait.")
	fs.BoolVar(&f.rotate, "rotate", false, "Only write a new token into the Secret of an existing registration.")
	_ = cmd.MarkFlagRequired("worker-kubeconfig")
	_ = cmd.MarkFlagFilename("worker-kubeconfig")
	return cmd
}

// register carries out register-cluster for the WorkerCluster name.
func register(ctx context.Context, o *Options, f *registerFlags, name string) error {
	if f.ttl < 10*time.Minute {
		return fmt.Errorf("--token-ttl %s is shorter than the 10m the API server accepts: give a longer one", f.ttl)
	}
	w, err := openWorker(f.kubeconfig, f.context)
	if err != nil {
		return err
	}
	ep, err := view.WorkerEndpoint(w.raw, f.context, f.kubeconfig, os.ReadFile)
	if err != nil {
		return err
	}
	hub, err := o.NewClient()
	if err != nil {
		return fmt.Errorf("connecting to the hub: %w (check --kubeconfig and --context)", err)
	}
	secret := name + "-kubeconfig"
	existing, err := readRegistration(ctx, hub, name, secret)
	if err != nil {
		return err
	}
	action, err := view.DecideRegistration(name, secret, ep.Server, existing, f.rotate)
	if err != nil {
		return err
	}
	fmt.Fprintln(o.Out, map[view.RegistrationAction]string{
		view.Register:   "registering " + name + " at " + ep.Server,
		view.Reregister: name + " is registered at " + ep.Server + " already: applying the hub's access again and writing a new token",
		view.Rotate:     "rotating the token of " + name + " at " + ep.Server,
	}[action])
	objs, sa, err := hubAccessObjects()
	if err != nil {
		return err
	}
	if action != view.Rotate {
		if err := applyOnWorker(ctx, w.client, objs, o.Out); err != nil {
			return err
		}
	}
	kubeconfig, err := mintKubeconfig(ctx, w.client, name, sa, ep, f.ttl, o.Out)
	if err != nil {
		return err
	}
	if err := writeSecret(ctx, hub, existing.Secret, secret, kubeconfig, o.Out); err != nil {
		return err
	}
	if action == view.Register {
		wc := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: secret}}}
		if err := hub.Create(ctx, wc); err != nil {
			return fmt.Errorf("creating WorkerCluster %s on the hub: %w (its Secret %s is written: run the command again)", name, err, secret)
		}
		fmt.Fprintf(o.Out, "hub: workercluster/%s created\n", name)
	} else {
		fmt.Fprintf(o.Out, "hub: workercluster/%s kept as it is\n", name)
	}
	return waitConnected(ctx, hub, name, f.wait, o.Out)
}

// worker is a worker cluster reached with the user's kubeconfig for it.
type worker struct {
	raw    *clientcmdapi.Config
	server string
	client client.Client
}

func openWorker(file, context string) (*worker, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: file}
	raw, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("reading the worker kubeconfig %s: %w (check --worker-kubeconfig)", file, err)
	}
	if _, ok := raw.Contexts[context]; context != "" && !ok {
		return nil, fmt.Errorf("%s has no context %q: give --worker-context one of its contexts, or leave it out for the current one", file, context)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, context, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("the worker kubeconfig %s: %w: check --worker-kubeconfig and --worker-context", file, err)
	}
	c, err := workerClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("a client for the worker at %s (%s): %w (check --worker-kubeconfig)", cfg.Host, file, err)
	}
	return &worker{raw: raw, server: cfg.Host, client: c}, nil
}

// readRegistration reads what the hub holds under the WorkerCluster name and the Secret secret.
func readRegistration(ctx context.Context, hub client.Client, name, secret string) (view.Existing, error) {
	var ex view.Existing
	var list gantry.WorkerClusterList
	if err := hub.List(ctx, &list); err != nil {
		return ex, fmt.Errorf("listing WorkerClusters on the hub: %w (you need to read them)", err)
	}
	for i := range list.Items {
		wc := &list.Items[i]
		switch {
		case wc.Name == name:
			ex.Cluster = wc
		case wc.Spec.SecretName() == secret:
			ex.SecretUsers = append(ex.SecretUsers, wc.Name)
		}
	}
	var s corev1.Secret
	switch err := hub.Get(ctx, types.NamespacedName{Namespace: gantry.GantryNamespace, Name: secret}, &s); {
	case err == nil:
		ex.Secret = &s
	case !apierrors.IsNotFound(err):
		return ex, fmt.Errorf("reading Secret %s/%s on the hub: %w (you need to read Secrets there)", gantry.GantryNamespace, secret, err)
	}
	return ex, nil
}

// hubAccessObjects are gantry-system and the hub's access on a worker, as rendered from the chart, and
// the ServiceAccount among them whose tokens the hub uses.
func hubAccessObjects() ([]*unstructured.Unstructured, types.NamespacedName, error) {
	objs, err := manifest.Decode(nsmanifest.Namespace)
	if err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("decoding the built-in namespace.yaml: %w (this kubectl-gantry is broken: use another build)", err)
	}
	access, err := manifest.Decode(workermanifest.HubAccess)
	if err != nil {
		return nil, types.NamespacedName{}, fmt.Errorf("decoding the built-in hub-access.yaml: %w (this kubectl-gantry is broken: use another build)", err)
	}
	objs = append(objs, access...)
	for _, u := range access {
		if u.GetKind() == "ServiceAccount" {
			return objs, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, nil
		}
	}
	return nil, types.NamespacedName{}, errors.New("the built-in hub-access.yaml has no ServiceAccount: this kubectl-gantry is broken, use another build")
}

// applyOnWorker applies objs with server-side apply. It forces ownership: these rights are exactly what
// the hub needs, whoever changed them since.
func applyOnWorker(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, out io.Writer) error {
	for _, u := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s on the worker: %w (the worker kubeconfig's user must be allowed to create namespaces, "+
				"ServiceAccounts, ClusterRoles and bindings, and to grant these rights)", describe(u), err)
		}
		fmt.Fprintf(out, "worker: %s applied\n", describe(u))
	}
	return nil
}

func describe(o client.Object) string {
	kind := strings.ToLower(o.GetObjectKind().GroupVersionKind().Kind)
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s/%s -n %s", kind, o.GetName(), o.GetNamespace())
	}
	return kind + "/" + o.GetName()
}

// mintKubeconfig requests a token of sa on the worker, builds the hub's kubeconfig around it and checks
// that the hub will take it and that it works on the worker.
func mintKubeconfig(ctx context.Context, c client.Client, name string, sa types.NamespacedName, ep view.Endpoint,
	ttl time.Duration, out io.Writer) ([]byte, error) {
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))}}
	if err := c.SubResource("token").Create(ctx, account, tr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("ServiceAccount %s is not on the worker: register without --rotate to create the hub's access there", sa)
		}
		return nil, fmt.Errorf("requesting a token of ServiceAccount %s on the worker: %w (you need to create serviceaccounts/token there)", sa, err)
	}
	expiry := tr.Status.ExpirationTimestamp.UTC()
	granted := time.Until(expiry).Round(time.Minute)
	note := ""
	if granted < ttl-time.Minute {
		note = fmt.Sprintf(", less than the %s asked for: the worker's API server caps token lifetimes", ttl)
	}
	fmt.Fprintf(out, "worker: token of serviceaccount/%s -n %s expires %s (in %s%s); rotate it before then with --rotate\n", sa.Name, sa.Namespace,
		expiry.Format(time.RFC3339), granted, note)
	kubeconfig, err := view.HubKubeconfig(name, sa.Name, ep, tr.Status.Token)
	if err != nil {
		return nil, fmt.Errorf("writing the hub's kubeconfig for %s: %w (check the worker's server and CA in --worker-kubeconfig)", name, err)
	}
	if err := checkHubAccess(ctx, kubeconfig, sa.Namespace, out); err != nil {
		return nil, err
	}
	return kubeconfig, nil
}

// checkHubAccess checks that the hub accepts the kubeconfig and that its token reaches the worker with
// the hub's rights, reading the hub's Lease there as the hub does. The authorizer may take a moment to
// see bindings just applied, so refusals are tried again for a few seconds.
func checkHubAccess(ctx context.Context, kubeconfig []byte, ns string, out io.Writer) error {
	cfg, err := workerconfig.RESTConfig(kubeconfig, workerconfig.Policy{AllowLoopback: true})
	if err != nil {
		return fmt.Errorf("the hub would refuse the kubeconfig built for it: %w (fix the worker's cluster entry in --worker-kubeconfig)", err)
	}
	if _, err := workerconfig.RESTConfig(kubeconfig, workerconfig.Policy{}); err != nil {
		fmt.Fprintf(out, "note: a hub started without --allow-loopback-workers refuses this kubeconfig: %v\n", err)
	}
	c, err := workerClient(cfg)
	if err != nil {
		return fmt.Errorf("a client with the hub's token for %s: %w (nothing was written on the hub)", cfg.Host, err)
	}
	key := types.NamespacedName{Namespace: ns, Name: gantry.HubLeaseName}
	for tries := 0; ; tries++ {
		err = c.Get(ctx, key, &coordinationv1.Lease{})
		if err == nil || apierrors.IsNotFound(err) {
			fmt.Fprintln(out, "worker: the token works with the hub's rights")
			return nil
		}
		if !(apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) || tries >= 20 {
			return fmt.Errorf("the new token does not work on the worker at %s: %w (nothing was written on the hub)", cfg.Host, err)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// writeSecret writes the kubeconfig into the registration Secret, updating only its data key when the
// Secret exists.
func writeSecret(ctx context.Context, hub client.Client, existing *corev1.Secret, name string, kubeconfig []byte, out io.Writer) error {
	ref := gantry.GantryNamespace + "/" + name
	if existing == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: gantry.GantryNamespace, Name: name,
				Labels: map[string]string{"app.kubernetes.io/part-of": "gantry", "app.kubernetes.io/managed-by": fieldManager}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{workerconfig.SecretKey: kubeconfig},
		}
		if err := hub.Create(ctx, s); err != nil {
			return fmt.Errorf("creating Secret %s on the hub: %w (you need to create Secrets there)", ref, err)
		}
		fmt.Fprintf(out, "hub: secret/%s -n %s created\n", name, gantry.GantryNamespace)
		return nil
	}
	s := existing.DeepCopy()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	_, previous, _ := view.HubKubeconfigParts(s.Data[workerconfig.SecretKey])
	s.Data[workerconfig.SecretKey] = kubeconfig
	if err := hub.Update(ctx, s); err != nil {
		return fmt.Errorf("updating Secret %s on the hub: %w (run the command again)", ref, err)
	}
	fmt.Fprintf(out, "hub: secret/%s -n %s updated with the new token\n", name, gantry.GantryNamespace)
	if exp, ok := view.TokenExpiry(previous); ok && exp.After(time.Now()) {
		fmt.Fprintf(out, "note: the previous token stays valid until %s; deleting ServiceAccount gantry-hub-remote on the worker "+
			"revokes every token of it\n", exp.Format(time.RFC3339))
	}
	return nil
}

// waitConnected waits up to timeout until the WorkerCluster is Connected, printing why not while it is not.
func waitConnected(ctx context.Context, hub client.Client, name string, timeout time.Duration, out io.Writer) error {
	if timeout == 0 {
		fmt.Fprintf(out, "not waiting for workercluster/%s to connect (--wait 0): kubectl gantry clusters shows it\n", name)
		return nil
	}
	fmt.Fprintf(out, "waiting up to %s for workercluster/%s to be Connected\n", timeout, name)
	deadline := time.Now().Add(timeout)
	last := "none"
	for {
		var wc gantry.WorkerCluster
		err := hub.Get(ctx, types.NamespacedName{Name: name}, &wc)
		state := "the hub has not reported on it yet"
		if err != nil {
			state = "reading it: " + err.Error()
		} else if c := apimeta.FindStatusCondition(wc.Status.Conditions, gantry.ClusterConnected); c != nil {
			if c.Status == metav1.ConditionTrue {
				fmt.Fprintf(out, "hub: workercluster/%s Connected\n", name)
				return nil
			}
			state = fmt.Sprintf("Connected=%s (%s): %s", c.Status, c.Reason, c.Message)
			if hint := view.ConnectedHint(c.Reason); hint != "" {
				state += "; " + hint
			}
		}
		if state != last {
			fmt.Fprintln(out, "  "+state)
			last = state
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("workercluster/%s is not Connected after %s: %s. Its Secret and the worker's objects stay: "+
				"fix that and wait (kubectl gantry clusters), or run unregister-cluster %s", name, timeout, last, name)
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return err
		}
	}
}

type unregisterFlags struct {
	kubeconfig, context string
	wait                time.Duration
	force               bool
}

func newUnregisterCommand(o *Options) *cobra.Command {
	f := &unregisterFlags{}
	cmd := &cobra.Command{
		Use:   "unregister-cluster NAME",
		Short: "Unregister a worker cluster: cordon it, wait for its jobs, delete its WorkerCluster and Secret",
		Long: `unregister-cluster cordons the WorkerCluster NAME, so no new jobs go there, and waits until no hub
Workload runs there or may still win it (a copy there nominated before the cordon). Then it deletes the
WorkerCluster and its Secret. With --worker-kubeconfig it also removes the hub's access on the worker
(ServiceAccount gantry-hub-remote and its rights), which revokes the hub's tokens there.

What stays: on the worker, namespace gantry-system, Gantry's CRDs, the agent, and the Jobs and copies Gantry
left there; on the hub, the finished Workloads and Jobs that ran there, and the GlobalQueues that list NAME.
With --force it does not wait: jobs still running there go on unwatched, and the hub holds their quota (and
their hub Jobs if deleted) until NAME is registered again.`,
		Example: `  kubectl gantry unregister-cluster worker-3 --worker-kubeconfig worker-3.kubeconfig
  kubectl gantry unregister-cluster worker-3 --wait 1h     # wait longer for its jobs
  kubectl gantry unregister-cluster worker-3 --force       # do not wait (the cluster is gone)`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: clusterNames(o),
		RunE: func(cmd *cobra.Command, args []string) error {
			return unregister(cmd.Context(), o, f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "worker-kubeconfig", "", "Kubeconfig of the worker cluster: also remove the hub's access there.")
	fs.StringVar(&f.context, "worker-context", "", "Context of --worker-kubeconfig (default: its current context).")
	fs.DurationVar(&f.wait, "wait", 10*time.Minute, "How long to wait for the jobs on the cluster to finish.")
	fs.BoolVar(&f.force, "force", false, "Do not wait for the jobs on the cluster.")
	_ = cmd.MarkFlagFilename("worker-kubeconfig")
	return cmd
}

// unregister carries out unregister-cluster for the WorkerCluster name.
func unregister(ctx context.Context, o *Options, f *unregisterFlags, name string) error {
	hub, err := o.NewClient()
	if err != nil {
		return fmt.Errorf("connecting to the hub: %w (check --kubeconfig and --context)", err)
	}
	ex, err := readRegistration(ctx, hub, name, name+"-kubeconfig")
	if err != nil {
		return err
	}
	secret := name + "-kubeconfig"
	switch {
	case ex.Cluster != nil && ex.Cluster.Spec.ClusterProfileRef != nil:
		secret, ex.Secret, ex.SecretUsers = "", nil, nil // no Secret of its own to delete
	case ex.Cluster != nil && ex.Cluster.Spec.SecretName() != "":
		secret = ex.Cluster.Spec.SecretName()
		if ex, err = readRegistration(ctx, hub, name, secret); err != nil {
			return err
		}
	}
	var w *worker
	if f.kubeconfig != "" {
		// Checked before anything changes, so that a wrong file cannot take the hub's access away from another worker.
		if w, err = openWorker(f.kubeconfig, f.context); err != nil {
			return err
		}
		if err := checkSameWorker(ctx, hub, name, ex, w.server, f.kubeconfig); err != nil {
			return err
		}
	}
	running, err := drain(ctx, hub, ex.Cluster, f, o.Out)
	if err != nil {
		return err
	}
	if err := deleteRegistration(ctx, hub, name, secret, ex, o.Out); err != nil {
		return err
	}
	if w != nil {
		if err := removeHubAccess(ctx, w.client, o.Out); err != nil {
			return err
		}
	}
	var queues gantry.GlobalQueueList
	if err := hub.List(ctx, &queues); err != nil {
		return fmt.Errorf("listing GlobalQueues on the hub: %w (%s is unregistered; check which GlobalQueues still list it)", err, name)
	}
	fmt.Fprintln(o.Out, "what stays:")
	for _, line := range view.Leftovers(name, w != nil, queues.Items, running) {
		fmt.Fprintln(o.Out, "  "+line)
	}
	return nil
}

// checkSameWorker refuses a worker kubeconfig that reaches another cluster than the registration does,
// or a cluster that another WorkerCluster reaches.
func checkSameWorker(ctx context.Context, hub client.Client, name string, ex view.Existing, server, file string) error {
	if ex.Secret != nil {
		if was, _, err := view.HubKubeconfigParts(ex.Secret.Data[workerconfig.SecretKey]); err == nil && !view.SameServer(was, server) {
			return fmt.Errorf("%s reaches %s, but WorkerCluster %s reaches %s: give the kubeconfig of %s, or leave out --worker-kubeconfig",
				file, server, name, was, name)
		}
	}
	var list gantry.WorkerClusterList
	if err := hub.List(ctx, &list); err != nil {
		return fmt.Errorf("listing WorkerClusters on the hub: %w (you need to read them)", err)
	}
	for _, wc := range list.Items {
		if wc.Name == name || wc.Spec.SecretName() == "" {
			continue
		}
		var s corev1.Secret
		if err := hub.Get(ctx, types.NamespacedName{Namespace: gantry.GantryNamespace, Name: wc.Spec.SecretName()}, &s); err != nil {
			continue // a registration without a readable Secret reaches nothing
		}
		if other, _, err := view.HubKubeconfigParts(s.Data[workerconfig.SecretKey]); err == nil && view.SameServer(other, server) {
			return fmt.Errorf("%s reaches %s, which WorkerCluster %s uses too: removing the hub's access there would cut %s off; "+
				"leave out --worker-kubeconfig", file, server, wc.Name, wc.Name)
		}
	}
	return nil
}

// drain cordons the WorkerCluster and waits until no hub Workload needs it; with --force it only says
// which still do. It returns those that still run there.
func drain(ctx context.Context, hub client.Client, wc *gantry.WorkerCluster, f *unregisterFlags, out io.Writer) ([]string, error) {
	if wc == nil {
		return nil, nil
	}
	if !wc.Spec.Cordoned {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"cordoned":true}}`))
		if err := hub.Patch(ctx, wc.DeepCopy(), patch); err != nil {
			return nil, fmt.Errorf("cordoning WorkerCluster %s: %w (you need to patch WorkerClusters)", wc.Name, err)
		}
	}
	fmt.Fprintf(out, "hub: workercluster/%s cordoned: no new jobs go there\n", wc.Name)
	deadline := time.Now().Add(f.wait)
	last := -1
	for {
		var list gantry.WorkloadList
		if err := hub.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("listing Workloads on the hub: %w (you need to list them in every namespace)", err)
		}
		running, nominated := dispatch.OnCluster(wc.Name, list.Items)
		n := len(running) + len(nominated)
		if n > 0 && f.force {
			fmt.Fprintf(out, "--force: not waiting for %s on %s\n", workloads(n), wc.Name)
			return running, nil
		}
		if n == 0 {
			return nil, nil
		}
		if n != last {
			fmt.Fprintf(out, "  %s %s: %s\n", stillNeed(n), wc.Name, needs(running, nominated))
			last = n
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after %s, %s %s (%s): wait longer with --wait, or pass --force to unregister "+
				"it anyway; %s stays cordoned", f.wait, stillNeed(n), wc.Name, needs(running, nominated), wc.Name)
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return nil, err
		}
	}
}

func workloads(n int) string {
	if n == 1 {
		return "1 Workload"
	}
	return fmt.Sprintf("%d Workloads", n)
}

func stillNeed(n int) string {
	if n == 1 {
		return "1 Workload still needs"
	}
	return fmt.Sprintf("%d Workloads still need", n)
}

func needs(running, nominated []string) string {
	var parts []string
	if len(running) > 0 {
		parts = append(parts, "running "+strings.Join(running, ", "))
	}
	if len(nominated) > 0 {
		parts = append(parts, "nominated "+strings.Join(nominated, ", "))
	}
	return strings.Join(parts, "; ")
}

// deleteRegistration deletes the WorkerCluster and its Secret, unless another WorkerCluster reads it.
func deleteRegistration(ctx context.Context, hub client.Client, name, secret string, ex view.Existing, out io.Writer) error {
	if ex.Cluster == nil {
		fmt.Fprintf(out, "hub: workercluster/%s not found\n", name)
	} else if err := hub.Delete(ctx, ex.Cluster); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting WorkerCluster %s: %w (it is cordoned and drained: run the command again)", name, err)
	} else {
		fmt.Fprintf(out, "hub: workercluster/%s deleted\n", name)
	}
	switch {
	case secret == "":
		fmt.Fprintf(out, "hub: clusterprofile/%s -n %s kept: it belongs to the fleet's inventory\n", ex.Cluster.Spec.ClusterProfileRef.Name, gantry.GantryNamespace)
	case len(ex.SecretUsers) > 0:
		fmt.Fprintf(out, "hub: secret/%s -n %s kept: WorkerCluster %s reads it\n", secret, gantry.GantryNamespace, strings.Join(ex.SecretUsers, ", "))
	case ex.Secret == nil:
		fmt.Fprintf(out, "hub: secret/%s -n %s not found\n", secret, gantry.GantryNamespace)
	default:
		if err := hub.Delete(ctx, ex.Secret); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Secret %s/%s: %w (delete it by hand: it holds a token for the worker)", gantry.GantryNamespace, secret, err)
		}
		fmt.Fprintf(out, "hub: secret/%s -n %s deleted\n", secret, gantry.GantryNamespace)
	}
	return nil
}

// removeHubAccess deletes the objects of hub-access.yaml on the worker, bindings first; the namespace
// stays, since the agent runs there.
func removeHubAccess(ctx context.Context, c client.Client, out io.Writer) error {
	access, err := manifest.Decode(workermanifest.HubAccess)
	if err != nil {
		return fmt.Errorf("decoding the built-in hub-access.yaml: %w (this kubectl-gantry is broken: use another build)", err)
	}
	for i := len(access) - 1; i >= 0; i-- {
		u := access[i]
		err := c.Delete(ctx, u)
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "worker: %s not found\n", describe(u))
		case err != nil:
			return fmt.Errorf("deleting %s on the worker: %w (the worker kubeconfig's user must be allowed to delete it)", describe(u), err)
		default:
			fmt.Fprintf(out, "worker: %s deleted\n", describe(u))
		}
	}
	return nil
}
