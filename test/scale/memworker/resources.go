package memworker

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// resource is one kind the server serves: what discovery lists, how paths name it, how it is stored.
type resource struct {
	group, version, name, kind string
	namespaced                 bool
	// status says the resource has a status subresource: writes of the main resource keep the stored
	// status, writes of /status change nothing else.
	status bool
	// statusOnCreate keeps the status a create sends (nodes); otherwise a create starts without one.
	statusOnCreate bool
	// review marks the access reviews: answered, never stored.
	review     bool
	shortNames []string
}

// served is every resource of the server: what the hub reads and writes on a worker (copies, Gantry's
// Jobs, capacity reports, its lease, namespaces, its access reviews), what the agent reads (nodes,
// pods, the classes pods may name, ResourceQuotas), and nothing else. Other job kinds (JobSet, RayJob, TrainJob) are not served, so the hub runs
// only batch Jobs here.
var served = []*resource{
	{version: "v1", name: "namespaces", kind: "Namespace", status: true},
	{version: "v1", name: "nodes", kind: "Node", status: true, statusOnCreate: true},
	{version: "v1", name: "pods", kind: "Pod", namespaced: true, status: true},
	{group: "batch", version: "v1", name: "jobs", kind: "Job", namespaced: true, status: true},
	{group: "coordination.k8s.io", version: "v1", name: "leases", kind: "Lease", namespaced: true},
	{group: "scheduling.k8s.io", version: "v1", name: "priorityclasses", kind: "PriorityClass"},
	{group: "node.k8s.io", version: "v1", name: "runtimeclasses", kind: "RuntimeClass"},
	{version: "v1", name: "resourcequotas", kind: "ResourceQuota", namespaced: true, status: true},
	{group: gantry.GroupVersion.Group, version: gantry.GroupVersion.Version, name: "workloads", kind: "Workload",
		namespaced: true, status: true, shortNames: []string{"wl"}},
	{group: gantry.GroupVersion.Group, version: gantry.GroupVersion.Version, name: "capacityreports", kind: "CapacityReport", status: true},
	{group: "authorization.k8s.io", version: "v1", name: "selfsubjectrulesreviews", kind: "SelfSubjectRulesReview", review: true},
	{group: "authorization.k8s.io", version: "v1", name: "selfsubjectaccessreviews", kind: "SelfSubjectAccessReview", review: true},
}

func (r *resource) groupVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: r.group, Version: r.version}
}

func (r *resource) apiVersion() string { return r.groupVersion().String() }

func (r *resource) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.group, Resource: r.name}
}

func (r *resource) groupVersionKind() schema.GroupVersionKind {
	return r.groupVersion().WithKind(r.kind)
}

// lookup finds the resource of a group, version and name; nil when it is not served.
func lookup(group, version, name string) *resource {
	for _, r := range served {
		if r.group == group && r.version == version && r.name == name {
			return r
		}
	}
	return nil
}

// byKind finds the stored resource of a kind; nil when it is not served.
func byKind(gvk schema.GroupVersionKind) *resource {
	for _, r := range served {
		if r.groupVersionKind() == gvk && !r.review {
			return r
		}
	}
	return nil
}

var resourceVerbs = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}

// resourceList is the discovery document of one group version; false when it is not served.
func resourceList(gv schema.GroupVersion) (*metav1.APIResourceList, bool) {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, r := range served {
		if r.groupVersion() != gv {
			continue
		}
		verbs := resourceVerbs
		if r.review {
			verbs = metav1.Verbs{"create"}
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.name, SingularName: strings.ToLower(r.kind),
			Namespaced: r.namespaced, Kind: r.kind, Verbs: verbs, ShortNames: r.shortNames})
		if r.status {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.name + "/status", Namespaced: r.namespaced,
				Kind: r.kind, Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
	}
	return list, len(list.APIResources) > 0
}

// groupList is the discovery document of /apis: every group but the core one, each in one version.
func groupList() *metav1.APIGroupList {
	list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	seen := map[string]bool{}
	for _, r := range served {
		if r.group == "" || seen[r.group] {
			continue
		}
		seen[r.group] = true
		list.Groups = append(list.Groups, *apiGroup(r))
	}
	return list
}

func apiGroup(r *resource) *metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: r.apiVersion(), Version: r.version}
	return &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: r.group,
		Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

// group is the discovery document of one group; false when it is not served.
func group(name string) (*metav1.APIGroup, bool) {
	for _, r := range served {
		if r.group == name && name != "" {
			return apiGroup(r), true
		}
	}
	return nil, false
}
