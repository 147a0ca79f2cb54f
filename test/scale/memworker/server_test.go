package memworker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

func startServer(t *testing.T, o Options) *Server {
	t.Helper()
	if o.Name == "" {
		o.Name = "mem-1"
	}
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func newClient(t *testing.T, s *Server) client.Client {
	t.Helper()
	c, err := client.New(s.Config(), client.Options{Scheme: agentScheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func copyOf(ns, name string, labels map[string]string) *gantry.Workload {
	return &gantry.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: gantry.WorkloadSpec{QueueName: "q", PodSets: []gantry.PodSet{{Name: "main", Count: 1}}}}
}

// eventually calls f every 10 ms until it returns nil, for at most 10 s.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Created objects get what the API server sets (uid, version, creation time, generation); a second
// create of the name, and a create in a namespace that does not exist, are refused as the API server
// refuses them. Jobs and namespaces go in controller-runtime's protobuf, copies in JSON.
func TestCreateAndGetAsTheAPIServerDoes(t *testing.T) {
	s := startServer(t, Options{})
	c := newClient(t, s)
	ctx := context.Background()
	createNamespace(t, c, "team")
	cp := copyOf("team", "job-a", nil)
	if err := c.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if cp.UID == "" || cp.ResourceVersion == "" || cp.Generation != 1 || cp.CreationTimestamp.IsZero() {
		t.Fatalf("created copy: uid %q, version %q, generation %d, created %s", cp.UID, cp.ResourceVersion, cp.Generation, cp.CreationTimestamp)
	}
	if err := c.Create(ctx, copyOf("team", "job-a", nil)); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	if err := c.Create(ctx, copyOf("nowhere", "job-a", nil)); !apierrors.IsNotFound(err) {
		t.Fatalf("create in a missing namespace: %v, want NotFound", err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a"}, Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](3)}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var got batchv1.Job
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), &got); err != nil {
		t.Fatal(err)
	}
	if got.UID != job.UID || ptr.Deref(got.Spec.Parallelism, 0) != 3 {
		t.Fatalf("read back uid %q parallelism %v, want %q 3", got.UID, got.Spec.Parallelism, job.UID)
	}
	var system corev1.Namespace
	if err := c.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, &system); err != nil || system.UID == "" {
		t.Fatalf("kube-system: uid %q, %v", system.UID, err)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: "team", Name: "b"}, &got); !apierrors.IsNotFound(err) {
		t.Fatalf("missing Job: %v, want NotFound", err)
	}
}

// An update from a stale version conflicts; a spec change counts a generation and keeps the stored
// status; a status write changes the status only; a write that changes nothing is no new version; a
// merge patch of the status goes through, one naming another uid conflicts.
func TestUpdatesKeepTheAPIServersRules(t *testing.T) {
	s := startServer(t, Options{})
	c := newClient(t, s)
	ctx := context.Background()
	createNamespace(t, c, "team")
	cp := copyOf("team", "job-a", nil)
	if err := c.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	stale := cp.DeepCopy()
	cp.Spec.Priority = 5
	cp.Status.DispatchEpoch = 9 // not the main resource's to change
	if err := c.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if cp.Generation != 2 || cp.Status.DispatchEpoch != 0 {
		t.Fatalf("after a spec update: generation %d, epoch %d; want 2, 0", cp.Generation, cp.Status.DispatchEpoch)
	}
	stale.Spec.Priority = 7
	if err := c.Update(ctx, stale); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want Conflict", err)
	}
	cp.Status.DispatchEpoch = 3
	cp.Spec.Priority = 1 // not the status's to change
	if err := c.Status().Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if cp.Status.DispatchEpoch != 3 || cp.Spec.Priority != 5 || cp.Generation != 2 {
		t.Fatalf("after a status update: epoch %d, priority %d, generation %d; want 3, 5, 2", cp.Status.DispatchEpoch, cp.Spec.Priority, cp.Generation)
	}
	version := cp.ResourceVersion
	if err := c.Update(ctx, cp); err != nil || cp.ResourceVersion != version {
		t.Fatalf("an update that changes nothing: version %s -> %s, %v", version, cp.ResourceVersion, err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"dispatchEpoch":4,"nominatedClusters":["mem-1"]}}`))
	if err := c.Status().Patch(ctx, cp, patch); err != nil {
		t.Fatal(err)
	}
	if cp.Status.DispatchEpoch != 4 || len(cp.Status.NominatedClusters) != 1 {
		t.Fatalf("after a status patch: %+v", cp.Status)
	}
	wrongUID := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"uid":"other"},"spec":{"priority":2}}`))
	if err := c.Patch(ctx, cp, wrongUID); !apierrors.IsConflict(err) {
		t.Fatalf("a patch naming another uid: %v, want Conflict", err)
	}
}

// Deletes with a UID precondition delete only that object; an object with a finalizer waits, marked
// deleted, until its finalizer goes.
func TestDeleteWithPreconditionsAndFinalizers(t *testing.T) {
	s := startServer(t, Options{})
	c := newClient(t, s)
	ctx := context.Background()
	createNamespace(t, c, "team")
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "a"}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	other := types.UID("someone-else")
	if err := c.Delete(ctx, job, client.Preconditions{UID: &other}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with another uid: %v, want Conflict", err)
	}
	uid := job.UID
	if err := c.Delete(ctx, job, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), job); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v, want NotFound", err)
	}
	cp := copyOf("team", "job-a", nil)
	cp.Finalizers = []string{"gantry.dev/test"}
	if err := c.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil || cp.DeletionTimestamp == nil {
		t.Fatalf("a copy with a finalizer after delete: %v, deletion %v", err, cp.DeletionTimestamp)
	}
	cp.Finalizers = nil
	if err := c.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cp), cp); !apierrors.IsNotFound(err) {
		t.Fatalf("after its finalizer went: %v, want NotFound", err)
	}
}

// A list and a cache of copies by label see only the labelled ones; a copy that gains the label enters
// the cache, one that loses it leaves.
func TestListsAndCachesSelectByLabel(t *testing.T) {
	s := startServer(t, Options{})
	c := newClient(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createNamespace(t, c, "team")
	owned := map[string]string{gantry.WorkloadUIDLabel: "u1"}
	if err := c.Create(ctx, copyOf("team", "labelled", owned)); err != nil {
		t.Fatal(err)
	}
	plain := copyOf("team", "plain", nil)
	if err := c.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	var list gantry.WorkloadList
	if err := c.List(ctx, &list, client.HasLabels{gantry.WorkloadUIDLabel}); err != nil || len(list.Items) != 1 || list.Items[0].Name != "labelled" {
		t.Fatalf("list by label: %v, %d items", err, len(list.Items))
	}
	exists, _ := labels.NewRequirement(gantry.WorkloadUIDLabel, selection.Exists, nil)
	ca, err := cache.New(s.Config(), cache.Options{Scheme: agentScheme,
		ByObject: map[client.Object]cache.ByObject{&gantry.Workload{}: {Label: labels.NewSelector().Add(*exists)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.GetInformer(ctx, &gantry.Workload{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	cached := func(want ...string) func() error {
		return func() error {
			var l gantry.WorkloadList
			if err := ca.List(ctx, &l); err != nil {
				return err
			}
			var names []string
			for _, w := range l.Items {
				names = append(names, w.Name)
			}
			if fmt.Sprint(names) != fmt.Sprint(want) {
				return fmt.Errorf("cached %v, want %v", names, want)
			}
			return nil
		}
	}
	eventually(t, "the cache after sync", cached("labelled"))
	plain.Labels = owned
	if err := c.Update(ctx, plain); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache once a copy gained the label", cached("labelled", "plain"))
	plain.Labels = nil
	if err := c.Update(ctx, plain); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache once it lost it", cached("labelled"))
}

// A watch that asks for initial events gets every object, then the bookmark that ends them, then the
// changes (the WatchList protocol of client-go's reflectors).
func TestAWatchListEndsItsInitialEventsWithABookmark(t *testing.T) {
	s := startServer(t, Options{})
	c := newClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	createNamespace(t, c, "team")
	for _, name := range []string{"a", "b"} {
		if err := c.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	cs := kubernetes.NewForConfigOrDie(s.Config())
	w, err := cs.BatchV1().Jobs("team").Watch(ctx, metav1.ListOptions{SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var seen []string
	for e := range w.ResultChan() {
		job, _ := e.Object.(*batchv1.Job)
		seen = append(seen, string(e.Type)+" "+job.Name)
		if e.Type == "BOOKMARK" {
			if job.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Fatalf("the bookmark after the initial events lacks %s: %v", metav1.InitialEventsAnnotationKey, job.Annotations)
			}
			if err := c.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "c"}}); err != nil {
				t.Fatal(err)
			}
		}
		if len(seen) == 4 {
			break
		}
	}
	if want := "[ADDED a ADDED b BOOKMARK  ADDED c]"; fmt.Sprint(seen) != want {
		t.Fatalf("events %v, want %s", seen, want)
	}
}

// Discovery lists Gantry's API and the kinds the hub uses, not the other job kinds, in the plain form,
// which client-go's discovery accepts after the aggregated one; a client that accepts only the
// aggregated form is told so.
func TestDiscoveryAnswersInThePlainForm(t *testing.T) {
	s := startServer(t, Options{})
	dc := discovery.NewDiscoveryClientForConfigOrDie(s.Config())
	groups, resources, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	slices.Sort(names)
	if want := "[ authorization.k8s.io batch coordination.k8s.io gantry.dev node.k8s.io scheduling.k8s.io]"; fmt.Sprint(names) != want {
		t.Fatalf("groups %v, want %s", names, want)
	}
	found := map[string]bool{}
	for _, list := range resources {
		for _, r := range list.APIResources {
			found[list.GroupVersion+" "+r.Name] = true
		}
	}
	for _, want := range []string{"gantry.dev/v1beta1 workloads", "gantry.dev/v1beta1 workloads/status", "gantry.dev/v1beta1 capacityreports", "batch/v1 jobs"} {
		if !found[want] {
			t.Errorf("discovery lacks %s: %v", want, found)
		}
	}
	if _, err := dc.ServerResourcesForGroupVersion("jobset.x-k8s.io/v1alpha2"); !apierrors.IsNotFound(err) {
		t.Errorf("discovery of JobSets: %v, want NotFound", err)
	}
	rc, err := rest.RESTClientFor(&rest.Config{Host: s.Config().Host, BearerToken: s.adminToken, TLSClientConfig: s.Config().TLSClientConfig,
		ContentConfig: rest.ContentConfig{GroupVersion: &schema.GroupVersion{}, NegotiatedSerializer: clientgoscheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	err = rc.Get().AbsPath("/apis").SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").Do(context.Background()).Error()
	if !apierrors.IsNotAcceptable(err) {
		t.Errorf("discovery asked for the aggregated form only: %v, want NotAcceptable", err)
	}
}
