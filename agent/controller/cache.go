package controller

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantryv1beta1 "github.com/gantry-dev/gantry/apis/v1beta1"
)

// CacheOptions is how the agent's manager must cache: only Workload copies (objects labelled
// gantry.dev/workload-uid), only the cluster's own CapacityReport, and no managedFields on anything (the
// agent caches every Pod, Node and Job of the cluster). Nodes also lose status.images.
func CacheOptions(clusterName string) cache.Options {
	isCopy, err := labels.NewRequirement(gantryv1beta1.WorkloadUIDLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // the label is a constant
	}
	return cache.Options{
		DefaultTransform: stripManagedFields,
		ByObject: map[client.Object]cache.ByObject{
			&gantryv1beta1.Workload{}:       {Label: labels.NewSelector().Add(*isCopy)},
			&gantryv1beta1.CapacityReport{}: {Field: fields.OneTermEqualSelector("metadata.name", clusterName)},
			&corev1.Node{}:                  {Transform: stripNode},
			// The hub's lease, which says whether the hub still reaches this cluster (failover policy Fence).
			&coordinationv1.Lease{}: {
				Namespaces: map[string]cache.Config{gantryv1beta1.GantryNamespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", gantryv1beta1.HubLeaseName),
			},
		},
	}
}

// stripManagedFields drops metadata.managedFields, which the agent never reads.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// stripNode drops managedFields and the node's image list, which the agent never reads.
func stripNode(obj any) (any, error) {
	if n, ok := obj.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return stripManagedFields(obj)
}
