// Package v1alpha1 holds Gantry's API: the hub's registry of worker clusters, its global and namespaced
// queues, the Workload that stands for one submitted job, and the capacity report an agent publishes in
// its own cluster.
//
// +kubebuilder:object:generate=true
// +groupName=gantry.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every Gantry kind.
	GroupVersion = schema.GroupVersion{Group: "gantry.dev", Version: "v1alpha1"}

	// SchemeBuilder registers Gantry's kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds Gantry's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
