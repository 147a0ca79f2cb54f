package view

import (
	"fmt"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/jobkind"
)

// JobRef names a job as a user does: NAME, or KIND/NAME to say which kind's (jobset/train).
type JobRef struct {
	// Kind is nil when the user named none: the job of that name, whatever its kind.
	Kind jobkind.Kind
	Name string
}

// ParseJobRef reads NAME or KIND/NAME, KIND as kubectl takes it (KindNamed).
func ParseJobRef(s string) (JobRef, error) {
	kind, name, withKind := strings.Cut(s, "/")
	if !withKind {
		return JobRef{Name: s}, nil
	}
	k, ok := KindNamed(kind)
	if !ok {
		return JobRef{}, fmt.Errorf("%q is not a kind of job Gantry dispatches: name one of %s, as in %s/%s", kind, kindList(), KindRef(jobkind.All()[0]), name)
	}
	if name == "" || strings.Contains(name, "/") {
		return JobRef{}, fmt.Errorf("%q: want NAME or KIND/NAME, as in jobset/train", s)
	}
	return JobRef{Kind: k, Name: name}, nil
}

// String is the reference as a user writes it.
func (r JobRef) String() string {
	if r.Kind == nil {
		return r.Name
	}
	return KindRef(r.Kind) + "/" + r.Name
}

// KindNamed is the kind of job a user names as kubectl takes a type: its kind (JobSet, jobset), its
// resource (jobsets), either with its API group (jobsets.jobset.x-k8s.io, job.batch).
func KindNamed(s string) (jobkind.Kind, bool) {
	for _, k := range jobkind.All() {
		r := JobResource(k)
		for _, name := range []string{string(k.Name()), r.Resource} {
			if strings.EqualFold(s, name) || strings.EqualFold(s, name+"."+r.Group) {
				return k, true
			}
		}
	}
	return nil, false
}

// KindRef is the kind as references write it: jobset.
func KindRef(k jobkind.Kind) string { return jobkind.Ref(k.Name()) }

// KindPlural names the kind's objects in sentences: JobSets.
func KindPlural(k jobkind.Kind) string { return string(k.Name()) + "s" }

func kindList() string {
	var names []string
	for _, k := range jobkind.All() {
		names = append(names, KindRef(k))
	}
	return strings.Join(names, ", ")
}

// JobResource is the API resource of the kind's objects, as RBAC names it: jobs.batch,
// jobsets.jobset.x-k8s.io.
func JobResource(k jobkind.Kind) schema.GroupResource { return k.Resource().GroupResource() }

// JobAccess is what a user asks the hub's authorizer to verb a job of the kind in the namespace (name
// empty for all of them). Whoever may read the job may read what Gantry tells of it: its Workload's
// story on the page, its pods' logs (with pods/log).
func JobAccess(verb string, k jobkind.Kind, namespace, name string) authorizationv1.ResourceAttributes {
	r := JobResource(k)
	return authorizationv1.ResourceAttributes{Verb: verb, Group: r.Group, Version: k.GroupVersionKind().Version,
		Resource: r.Resource, Namespace: namespace, Name: name}
}

// AmbiguousJobError says jobs of several kinds have the name, so the user must say which.
type AmbiguousJobError struct {
	Namespace, Name string
	Kinds           []jobkind.Kind
}

func (e *AmbiguousJobError) Error() string {
	var refs []string
	for _, k := range e.Kinds {
		refs = append(refs, JobRef{Kind: k, Name: e.Name}.String())
	}
	return fmt.Sprintf("jobs of %d kinds are named %s in namespace %s: name one, as %s", len(e.Kinds), e.Name, e.Namespace, strings.Join(refs, " or "))
}

// PickWorkload is the Workload of the referenced job among wls, those in namespace labelled with its
// name: of its kind, the one not being deleted, else the newest (a job resubmitted under its name gets
// its Workload once the old one is gone, so two live ones are not expected). Nil when there is none; an
// AmbiguousJobError when no kind was named and Workloads of several kinds have the name.
func PickWorkload(namespace string, ref JobRef, wls []gantry.Workload) (*gantry.Workload, error) {
	var pick *gantry.Workload
	var kinds []jobkind.Kind
	for i := range wls {
		wl := &wls[i]
		k := jobkind.Of(wl)
		if ref.Kind != nil && k.Name() != ref.Kind.Name() {
			continue
		}
		if !containsKind(kinds, k) {
			kinds = append(kinds, k)
		}
		switch {
		case pick == nil:
			pick = wl
		case (pick.DeletionTimestamp == nil) != (wl.DeletionTimestamp == nil):
			if wl.DeletionTimestamp == nil {
				pick = wl
			}
		case pick.CreationTimestamp.Before(&wl.CreationTimestamp):
			pick = wl
		}
	}
	if len(kinds) > 1 {
		sortKinds(kinds)
		return nil, &AmbiguousJobError{Namespace: namespace, Name: ref.Name, Kinds: kinds}
	}
	return pick, nil
}

func containsKind(kinds []jobkind.Kind, k jobkind.Kind) bool {
	for _, have := range kinds {
		if have.Name() == k.Name() {
			return true
		}
	}
	return false
}

// sortKinds orders kinds as jobkind.All does: Job first, then by name.
func sortKinds(kinds []jobkind.Kind) {
	sort.Slice(kinds, func(i, j int) bool {
		a, b := kinds[i].Name(), kinds[j].Name()
		return a == gantry.JobKindJob || (b != gantry.JobKindJob && a < b)
	})
}

// JobRefs are the references that name each job of wls on its own, sorted: its name, or KIND/NAME for
// a name that jobs of several kinds have.
func JobRefs(wls []gantry.Workload) []string {
	kinds := map[string][]jobkind.Kind{}
	for i := range wls {
		name, k := JobOrWorkloadName(&wls[i]), jobkind.Of(&wls[i])
		if !containsKind(kinds[name], k) {
			kinds[name] = append(kinds[name], k)
		}
	}
	var refs []string
	for name, ks := range kinds {
		if len(ks) == 1 {
			refs = append(refs, name)
			continue
		}
		for _, k := range ks {
			refs = append(refs, JobRef{Kind: k, Name: name}.String())
		}
	}
	sort.Strings(refs)
	return refs
}
