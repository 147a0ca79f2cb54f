package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ocm "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/hub"
)

// A WorkerClusterSet following an OCM Placement: the clusters its decision lists become WorkerClusters
// reached through their ClusterProfiles, one registered by hand is left alone, a job runs on the one it
// made; dropped from the decision, that cluster is cordoned and kept while its job runs, then removed.
func TestAWorkerClusterSetFollowsAPlacement(t *testing.T) {
	ctx := context.Background()
	const name = "worker-2"
	installClusterProfileAPI(t)
	w := workers[name]
	installHubAccess(t, w)
	tokenFile := filepath.Join(t.TempDir(), name+"-token")
	writeFile(t, tokenFile, revocableToken(t, w, "hub-token-set"))
	createProfile(t, name, "test", tokenFile)
	handMade := takeOverRegistration(t, name)
	startHubWith(t, hub.Options{Providers: testProviders(t)}, "worker-1")

	decision := createDecision(t, "gpus", "worker-1", name)
	set := &gantry.WorkerClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "ocm-gpus"},
		Spec: gantry.WorkerClusterSetSpec{PlacementRef: &gantry.PlacementReference{Name: "gpus"},
			Template: gantry.WorkerClusterTemplate{Labels: map[string]string{"source": "ocm"}}}}
	if err := hubEnv.client.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(ctx, set) })
	setSays(t, set, func(st gantry.WorkerClusterSetStatus) error {
		if st.Selected != 2 || st.Joined != 1 || st.Conflicts != 1 || st.Connected != 1 {
			return fmt.Errorf("counts %+v", st)
		}
		return nil
	})
	var made gantry.WorkerCluster
	if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: name}, &made); err != nil {
		t.Fatal(err)
	}
	if made.Spec.ClusterProfileRef == nil || made.Spec.ClusterProfileRef.Name != name || made.Labels["source"] != "ocm" ||
		made.Labels[gantry.WorkerClusterSetLabel] != set.Name {
		t.Fatalf("made %+v", made)
	}

	newGlobalQueue(t, "set", map[string]int64{name: 8})
	ns := newNamespace(t, "set")
	dumpOnFailure(t, ns)
	job := gpuJob(ns, "on-the-set", 1, 1)
	submit(t, job)
	if where := runsOn(t, job); where != name {
		t.Fatalf("runs on %s", where)
	}
	startRemote(t, name, job)

	setDecisions(t, decision, "worker-1")
	setSays(t, set, func(st gantry.WorkerClusterSetStatus) error {
		for _, m := range st.Clusters {
			if m.Name == name && m.State == gantry.MemberLeaving && strings.Contains(m.Message, "1 workloads") {
				return nil
			}
		}
		return fmt.Errorf("members %+v", st.Clusters)
	})
	consistently(t, name+" kept, cordoned, while its job runs", 2*time.Second, func() error {
		var wc gantry.WorkerCluster
		if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: name}, &wc); err != nil {
			return err
		}
		if !wc.Spec.Cordoned {
			return fmt.Errorf("not cordoned")
		}
		return nil
	})
	completeRemote(t, name, job)
	hubJobComplete(t, job)
	eventuallyWithin(t, 2*waitTimeout, name+"'s WorkerCluster removed", func() error {
		err := hubEnv.client.Get(ctx, types.NamespacedName{Name: name}, &gantry.WorkerCluster{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	setSays(t, set, func(st gantry.WorkerClusterSetStatus) error {
		if st.Selected != 1 || st.Joined != 0 || st.Leaving != 0 || st.Conflicts != 1 {
			return fmt.Errorf("counts %+v", st)
		}
		return nil
	})
	var other gantry.WorkerCluster
	if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: "worker-1"}, &other); err != nil {
		t.Fatal(err)
	}
	if other.Generation != 1 || other.Spec.Cordoned || other.Labels[gantry.WorkerClusterSetLabel] != "" {
		t.Fatalf("the hand-made WorkerCluster worker-1 was touched: generation %d, %+v", other.Generation, other.Spec)
	}
	_ = handMade
}

// takeOverRegistration removes the hand-made WorkerCluster of that name, so that a set may make it;
// at cleanup whatever holds the name goes and the hand-made one is back.
func takeOverRegistration(t *testing.T, name string) *gantry.WorkerCluster {
	t.Helper()
	ctx := context.Background()
	var wc gantry.WorkerCluster
	if err := hubEnv.client.Get(ctx, types.NamespacedName{Name: name}, &wc); err != nil {
		t.Fatal(err)
	}
	restore := &gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: *wc.Spec.DeepCopy()}
	gone := func() {
		eventually(t, "WorkerCluster "+name+" gone", func() error {
			var cur gantry.WorkerCluster
			err := hubEnv.client.Get(ctx, types.NamespacedName{Name: name}, &cur)
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			}
			if err := hubEnv.client.Delete(ctx, &cur); client.IgnoreNotFound(err) != nil {
				return err
			}
			return fmt.Errorf("deleting")
		})
	}
	gone()
	t.Cleanup(func() {
		gone()
		if err := hubEnv.client.Create(ctx, restore); err != nil {
			t.Errorf("registering %s again: %v", name, err)
		}
	})
	return restore
}

// createDecision creates a PlacementDecision of the Placement as OCM's scheduler writes it.
func createDecision(t *testing.T, placement string, clusters ...string) *ocm.PlacementDecision {
	t.Helper()
	d := &ocm.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: placement + "-decision-1", Namespace: hubNamespace,
		Labels: map[string]string{ocm.PlacementLabel: placement, ocm.DecisionGroupIndexLabel: "0"}}}
	if err := hubEnv.client.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hubEnv.client.Delete(context.Background(), d) })
	setDecisions(t, d, clusters...)
	return d
}

func setDecisions(t *testing.T, d *ocm.PlacementDecision, clusters ...string) {
	t.Helper()
	eventually(t, "writing the decisions of "+d.Name, func() error {
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(d), d); err != nil {
			return err
		}
		d.Status.Decisions = nil
		for _, c := range clusters {
			d.Status.Decisions = append(d.Status.Decisions, ocm.ClusterDecision{ClusterName: c, Reason: "selected"})
		}
		return hubEnv.client.Status().Update(context.Background(), d)
	})
}

// setSays waits until the set's status satisfies check.
func setSays(t *testing.T, set *gantry.WorkerClusterSet, check func(gantry.WorkerClusterSetStatus) error) {
	t.Helper()
	eventuallyWithin(t, 2*waitTimeout, "WorkerClusterSet "+set.Name, func() error {
		var cur gantry.WorkerClusterSet
		if err := hubEnv.client.Get(context.Background(), client.ObjectKeyFromObject(set), &cur); err != nil {
			return err
		}
		return check(cur.Status)
	})
}
