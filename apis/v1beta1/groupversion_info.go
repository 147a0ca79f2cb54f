// Package v1beta1 holds Gantry's API: the hub's registry of worker clusters, its global and namespaced
// queues, the Workload that stands for one submitted job, and the capacity report an agent publishes in
// its own cluster.
//
// +kubebuilder:object:generate=true
// +groupName=gantry.dev
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every Gantry kind.
	GroupVersion = schema.GroupVersion{Group: "gantry.dev", Version: "v1beta1"}

	// SchemeBuilder registers Gantry's kinds with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds Gantry's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// knownTypes are filled in by each kind's file.
	knownTypes []runtime.Object
)

func register(objs ...runtime.Object) { knownTypes = append(knownTypes, objs...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
