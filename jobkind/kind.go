// Package jobkind is what Gantry knows of each kind of job it dispatches: where its pods are described,
// how the hub's object is kept to Gantry (spec.managedBy), what Gantry creates on the winner, and how
// its status is read, mirrored and, when Gantry ends a job itself, set. Everything here is pure; the
// hub's and the agents' controllers do the I/O. A kind is one file of this package and a table of tests.
package jobkind

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	ray "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// Kind is one kind of job.
type Kind interface {
	// Name is the kind as Workload.spec.jobKind names it.
	Name() gantry.JobKind
	GroupVersionKind() schema.GroupVersionKind
	// Resource is the API resource of the kind's objects, as RBAC and the API server name it.
	Resource() schema.GroupVersionResource
	// New and NewList return empty objects of the kind.
	New() client.Object
	NewList() client.ObjectList
	// Held says whether the hub's object is kept to Gantry, so that no controller of the hub runs it
	// (spec.managedBy, or spec.suspend for a kind whose managedBy may not name Gantry), and if not, why.
	Held(obj client.Object) (bool, string)
	// PodSets are the object's groups of identical pods, in the object's order; an error says what in
	// the object Gantry cannot dispatch.
	PodSets(obj client.Object) ([]PodSet, error)
	// Remote is the object Gantry creates on the winner for the hub's object, whose Workload has podSets:
	// the worker's controller runs it (no managedBy, not suspended, no time to live: its end must be
	// mirrored before it goes), labelled with labels, with labels on every pod template too (and on
	// nothing else the worker's controller creates from it), and each pod set's template edited by edit.
	Remote(hub client.Object, podSets []gantry.PodSet, labels map[string]string, edit func(podSet string, tpl *corev1.PodTemplateSpec)) client.Object
	// State is how far the object got.
	State(obj client.Object) State
	// Progress is what a person reads of how far the object got (completions, failures, true
	// conditions, phases), leaving out the counts of pods that come and go (active, ready,
	// terminating, not yet counted): the hub mirrors a change of it sooner than one of the rest.
	Progress(obj client.Object) string
	// CopyStatus makes to's status that of from and says whether it changed.
	CopyStatus(to, from client.Object) bool
	// ClearStatus empties the object's status and says whether it changed.
	ClearStatus(obj client.Object) bool
	// Fail marks the object failed for reason, as Gantry ends a job it cannot run any more, and says
	// whether it changed; a finished object keeps its status.
	Fail(obj client.Object, reason, message string, now metav1.Time) bool
}

// Referrer is a Kind whose pods are described partly by another object of the hub, which the hub
// reads before it asks for the pod sets: a TrainJob's training runtime.
type Referrer interface {
	Kind
	// Reference is an empty object of the kind obj refers to, with its namespace and name set; an error
	// says what is wrong with the reference.
	Reference(obj client.Object) (client.Object, error)
	// WithReference is the Kind whose PodSets read the pods from ref, as Reference named and the hub
	// read it.
	WithReference(ref client.Object) Kind
}

// SuspendsFirst is a Kind whose controller makes a job's children anew whenever it finds them gone,
// also while the job is being deleted (the trainer applies a TrainJob's JobSet on every reconcile): a
// job of it deleted pods first while it runs would start new pods as the old ones go. Gantry suspends
// such a job, which stops its pods and keeps the children its controller makes from starting any,
// before it deletes it.
type SuspendsFirst interface {
	Kind
	// RemakesChildrenWhileDeleted marks the kind.
	RemakesChildrenWhileDeleted()
}

// SuspendBeforeDeletion tells whether a running job of the kind is suspended before it is deleted.
func SuspendBeforeDeletion(k Kind) bool {
	_, ok := k.(SuspendsFirst)
	return ok
}

// PodSet is one group of identical pods of a job.
type PodSet struct {
	// Name is unique in the job: "main" for a Job, the replicated job's name for a JobSet.
	Name string
	// Count of pods that run at once.
	Count int32
	// Template of the pods, in the object.
	Template *corev1.PodTemplateSpec
	// Annotations that may choose the pod set's placement (gantry.dev/gpu-products), over the object's.
	Annotations map[string]string
	// Deferred: the kind's controller creates these pods only once other pod sets' pods started or
	// finished (see gantry.PodSet.Deferred).
	Deferred bool
}

// State is how far a job got, as its status says.
type State struct {
	// Started: it ran, or runs, somewhere (its status was mirrored from a worker).
	Started bool
	// Finished: it ended; Succeeded says how.
	Finished  bool
	Succeeded bool
	// EndingSince: when its end was decided while it is not finished yet (a batch Job's
	// SuccessCriteriaMet or FailureTarget: its pods are being stopped, and Complete or Failed follows).
	EndingSince time.Time
	// Suspended: its spec.suspend is true.
	Suspended bool
}

// AddToScheme registers the API types of every kind (batch/v1 is in client-go's scheme).
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{jobset.AddToScheme, ray.AddToScheme, trainer.AddToScheme} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// Kinds are the kinds Gantry dispatches, by name.
var kinds = map[gantry.JobKind]Kind{}

func register(k Kind) { kinds[k.Name()] = k }

// All returns every kind, Job first, then by name.
func All() []Kind {
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Name(), out[j].Name()
		return a == gantry.JobKindJob || (b != gantry.JobKindJob && a < b)
	})
	return out
}

// Named returns the kind of that name; "" is a batch Job.
func Named(name gantry.JobKind) (Kind, bool) {
	if name == "" {
		name = gantry.JobKindJob
	}
	k, ok := kinds[name]
	return k, ok
}

// Of returns the kind of the job the Workload stands for.
func Of(wl *gantry.Workload) Kind {
	if k, ok := Named(wl.Spec.JobKind); ok {
		return k
	}
	return kinds[gantry.JobKindJob]
}

// ForObject returns the kind of obj, by its Go type.
func ForObject(obj client.Object) (Kind, bool) {
	for _, k := range kinds {
		if reflect.TypeOf(k.New()) == reflect.TypeOf(obj) {
			return k, true
		}
	}
	return nil, false
}

// Ref is the kind as names and references write it: jobset (Workload names, KIND/NAME, page paths).
func Ref(k gantry.JobKind) string { return strings.ToLower(string(k)) }

// WorkloadName is the name of the hub Workload that stands for the named job of the kind. The kind's
// prefix keeps a Job and a JobSet of the same name apart.
func WorkloadName(k Kind, jobName string) string {
	return Ref(k.Name()) + "-" + jobName
}

// ParseWorkloadName inverts WorkloadName: the kind and the job's name.
func ParseWorkloadName(name string) (Kind, string, bool) {
	for _, k := range kinds {
		if jobName, ok := strings.CutPrefix(name, Ref(k.Name())+"-"); ok {
			return k, jobName, true
		}
	}
	return nil, "", false
}

// JobName inverts WorkloadName for the Workload's kind.
func JobName(wl *gantry.Workload) string {
	if name := wl.Labels[gantry.JobNameLabel]; name != "" {
		return name
	}
	return strings.TrimPrefix(wl.Name, Ref(Of(wl).Name())+"-")
}

// setStatus makes *to want and says whether that changed it.
func setStatus[S any](to *S, want S) bool {
	if equality.Semantic.DeepEqual(*to, want) {
		return false
	}
	*to = want
	return true
}

// heldByManagedBy is Held for kinds whose spec.managedBy names Gantry.
func heldByManagedBy(k Kind, managedBy *string) (bool, string) {
	if v := ptr.Deref(managedBy, ""); v != gantry.JobManagedBy {
		return false, fmt.Sprintf("%s has label %s but spec.managedBy is %q, not %q", k.Name(), gantry.QueueLabel, v, gantry.JobManagedBy)
	}
	return true, ""
}

// labelTemplate puts labels on a pod template, and the pod set's name, so that the agent tells which
// set each pod belongs to.
func labelTemplate(tpl *corev1.PodTemplateSpec, podSet string, labels map[string]string) {
	tpl.Labels = merge(tpl.Labels, labels)
	tpl.Labels[gantry.PodSetLabel] = podSet
}

func merge(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra)+1)
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// trueConditions names the conditions that are true, in their order.
func trueConditions(conds []metav1.Condition) string {
	var names []string
	for _, c := range conds {
		if c.Status == metav1.ConditionTrue {
			names = append(names, c.Type)
		}
	}
	return fmt.Sprint(names)
}
