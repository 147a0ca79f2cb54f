package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// The Go allowlist is the file's: a rule added to one and not the other fails here.
func TestAllowlistIsHubAccessYAML(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "worker", "hub-access.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var clusterRules, logRules, namespaceRules []rbacv1.PolicyRule
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj struct {
			Kind     string              `json:"kind"`
			Metadata metav1.ObjectMeta   `json:"metadata"`
			Rules    []rbacv1.PolicyRule `json:"rules"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		switch obj.Kind {
		case "ClusterRole":
			if obj.Metadata.Name == "gantry-hub-remote-logs" {
				logRules = append(logRules, obj.Rules...)
			} else {
				clusterRules = append(clusterRules, obj.Rules...)
			}
		case "Role":
			if obj.Metadata.Namespace != gantry.GantryNamespace {
				t.Errorf("Role %s is in namespace %q; the rights review looks at %s", obj.Metadata.Name, obj.Metadata.Namespace, gantry.GantryNamespace)
			}
			namespaceRules = append(namespaceRules, obj.Rules...)
		}
	}
	if diff := cmp.Diff(clusterRules, slices.Concat(hubAccessClusterRules, hubAccessPodCheckRules, hubAccessBatchDeleteRules, hubAccessKindRules)); diff != "" {
		t.Errorf("ClusterRole rules of hub-access.yaml (-) and hubAccessClusterRules (+) differ:\n%s", diff)
	}
	if diff := cmp.Diff(logRules, hubAccessLogRules); diff != "" {
		t.Errorf("ClusterRole gantry-hub-remote-logs of hub-access.yaml (-) and hubAccessLogRules (+) differ:\n%s", diff)
	}
	if diff := cmp.Diff(namespaceRules, hubAccessNamespaceRules); diff != "" {
		t.Errorf("Role rules of hub-access.yaml (-) and hubAccessNamespaceRules (+) differ:\n%s", diff)
	}
}

func resourceRule(groups, resources, verbs string, names ...string) authorizationv1.ResourceRule {
	return authorizationv1.ResourceRule{APIGroups: strings.Split(groups, ","), Resources: strings.Split(resources, ","),
		Verbs: strings.Split(verbs, ","), ResourceNames: names}
}

func nonResourceRule(urls, verbs string) authorizationv1.NonResourceRule {
	return authorizationv1.NonResourceRule{NonResourceURLs: strings.Split(urls, ","), Verbs: strings.Split(verbs, ",")}
}

// leastPrivilege is what a worker's RBAC answers for the hub's ServiceAccount bound as hub-access.yaml
// says: its rules and Kubernetes' defaults for every authenticated user and service account.
func leastPrivilege() authorizationv1.SubjectRulesReviewStatus {
	var st authorizationv1.SubjectRulesReviewStatus
	for _, r := range slices.Concat(hubAccessNamespaceRules, hubAccessClusterRules, hubAccessPodCheckRules, hubAccessBatchDeleteRules, hubAccessKindRules, hubAccessLogRules, defaultResourceRules) {
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{APIGroups: r.APIGroups, Resources: r.Resources, Verbs: r.Verbs})
	}
	st.NonResourceRules = []authorizationv1.NonResourceRule{
		nonResourceRule("/healthz,/livez,/readyz,/version,/version/", "get"),
		nonResourceRule("/api,/api/*,/apis,/apis/*,/healthz,/livez,/openapi,/openapi/*,/readyz,/version,/version/", "get"),
		nonResourceRule("/.well-known/openid-configuration,/.well-known/openid-configuration/,/openid/v1/jwks,/openid/v1/jwks/", "get"),
	}
	return st
}

func plus(st authorizationv1.SubjectRulesReviewStatus, rules ...authorizationv1.ResourceRule) authorizationv1.SubjectRulesReviewStatus {
	// A copy: cases built from one status must not share its backing array.
	st.ResourceRules = append(slices.Clone(st.ResourceRules), rules...)
	return st
}

func TestRightsFrom(t *testing.T) {
	incomplete := leastPrivilege()
	incomplete.Incomplete, incomplete.EvaluationError = true, "webhook authorizer does not list rules"
	clusterAdmin := authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{resourceRule("*", "*", "*")},
		NonResourceRules: []authorizationv1.NonResourceRule{nonResourceRule("*", "*")},
	}
	metrics := leastPrivilege()
	metrics.NonResourceRules = append(metrics.NonResourceRules, nonResourceRule("/metrics,/healthz", "get"), nonResourceRule("/version", "post"))
	cases := map[string]struct {
		review authorizationv1.SubjectRulesReviewStatus
		want   Rights
	}{
		"least privilege": {review: leastPrivilege()},
		"nothing at all":  {},
		"cluster-admin":   {review: plus(clusterAdmin), want: Rights{Excess: []string{"*.*: *", "non-resource URL *: *"}}},
		"secrets":         {review: plus(leastPrivilege(), resourceRule("", "secrets", "get,list,watch")), want: Rights{Excess: []string{"secrets: get, list, watch"}}},
		"named secrets still count": {review: plus(leastPrivilege(), resourceRule("", "secrets", "get", "worker-token")),
			want: Rights{Excess: []string{"secrets: get"}}},
		"pods/exec": {review: plus(leastPrivilege(), resourceRule("", "pods/exec", "create")), want: Rights{Excess: []string{"pods/exec: create"}}},
		"pods beyond reading them": {review: plus(leastPrivilege(), resourceRule("", "pods,pods/log", "get,watch,delete")),
			want: Rights{Excess: []string{"pods: delete, watch", "pods/log: delete, watch"}}},
		"a verb beyond": {review: plus(leastPrivilege(), resourceRule("batch", "jobs", "get,update"), resourceRule("coordination.k8s.io", "leases", "delete")),
			want: Rights{Excess: []string{"jobs.batch: update", "leases.coordination.k8s.io: delete"}}},
		"wildcard verbs on an allowed resource": {review: plus(leastPrivilege(), resourceRule("gantry.dev", "workloads", "*")),
			want: Rights{Excess: []string{"workloads.gantry.dev: *"}}},
		"wildcard resources in an allowed group": {review: plus(leastPrivilege(), resourceRule("gantry.dev", "*", "get")),
			want: Rights{Excess: []string{"*.gantry.dev: get"}}},
		"an allowed resource in another group": {review: plus(leastPrivilege(), resourceRule("apps", "jobs", "get")),
			want: Rights{Excess: []string{"jobs.apps: get"}}},
		"duplicates merge": {review: plus(leastPrivilege(), resourceRule("", "secrets", "get"), resourceRule("", "secrets", "list,get")),
			want: Rights{Excess: []string{"secrets: get, list"}}},
		"non-resource URLs": {review: metrics, want: Rights{Excess: []string{"non-resource URL /metrics: get", "non-resource URL /version: post"}}},
		"incomplete":        {review: incomplete, want: Rights{Unknown: "the worker's authorizer did not list every rule: webhook authorizer does not list rules"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, rightsFrom(tc.review)); diff != "" {
				t.Errorf("rights (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLeastPrivilege(t *testing.T) {
	many := Rights{}
	for _, r := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		many.Excess = append(many.Excess, r+": get")
	}
	cases := map[string]struct {
		rights                  Rights
		wantStatus              metav1.ConditionStatus
		wantReason, wantMessage string
	}{
		"allowlist only": {wantStatus: metav1.ConditionTrue, wantReason: gantry.ReasonAllowlistOnly,
			wantMessage: "the hub holds only the rights of deploy/worker/hub-access.yaml"},
		"excess": {rights: Rights{Excess: []string{"*.*: *", "non-resource URL *: *"}}, wantStatus: metav1.ConditionFalse, wantReason: gantry.ReasonExcessRights,
			wantMessage: "the hub holds more rights on this cluster than deploy/worker/hub-access.yaml grants: *.*: *; non-resource URL *: *"},
		"bounded": {rights: many, wantStatus: metav1.ConditionFalse, wantReason: gantry.ReasonExcessRights,
			wantMessage: "grants: a: get; b: get; c: get; d: get; e: get; f: get; g: get; h: get; i: get; j: get; and 2 more"},
		"excess, perhaps more": {rights: Rights{Excess: []string{"secrets: get"}, Unknown: "incomplete"}, wantStatus: metav1.ConditionFalse,
			wantReason: gantry.ReasonExcessRights, wantMessage: "secrets: get (perhaps more: incomplete)"},
		"unknown": {rights: Rights{Unknown: "reviewing the hub's rights: forbidden"}, wantStatus: metav1.ConditionUnknown, wantReason: gantry.ReasonRightsUnknown,
			wantMessage: "reviewing the hub's rights: forbidden"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, reason, msg := LeastPrivilege(tc.rights)
			if status != tc.wantStatus || reason != tc.wantReason || !strings.HasSuffix(msg, tc.wantMessage) {
				t.Errorf("got %s/%s %q, want %s/%s ending in %q", status, reason, msg, tc.wantStatus, tc.wantReason, tc.wantMessage)
			}
		})
	}
}

func TestUncovered(t *testing.T) {
	lease := func(verbs string, names ...string) authorizationv1.ResourceRule {
		return resourceRule("coordination.k8s.io", "leases", verbs, names...)
	}
	withoutLeases := authorizationv1.SubjectRulesReviewStatus{}
	for _, r := range leastPrivilege().ResourceRules {
		if r.Resources[0] != "leases" {
			withoutLeases.ResourceRules = append(withoutLeases.ResourceRules, r)
		}
	}
	withoutLogs := authorizationv1.SubjectRulesReviewStatus{}
	for _, r := range leastPrivilege().ResourceRules {
		if r.Resources[0] != "pods" && r.Resources[0] != "pods/log" {
			withoutLogs.ResourceRules = append(withoutLogs.ResourceRules, r)
		}
	}
	defaultsOnly := authorizationv1.SubjectRulesReviewStatus{}
	for _, r := range defaultResourceRules {
		defaultsOnly.ResourceRules = append(defaultsOnly.ResourceRules, authorizationv1.ResourceRule{APIGroups: r.APIGroups, Resources: r.Resources, Verbs: r.Verbs})
	}
	defaultsOnly = plus(defaultsOnly, lease("get,create,update"))
	all := []string{
		"capacityreports.gantry.dev get", "capacityreports.gantry.dev list", "capacityreports.gantry.dev watch",
		"jobs.batch create", "jobs.batch delete", "jobs.batch get", "jobs.batch list", "jobs.batch patch", "jobs.batch watch",
		"jobs.batch/status get",
		"namespaces create", "namespaces get",
		"workloads.gantry.dev create", "workloads.gantry.dev delete", "workloads.gantry.dev get", "workloads.gantry.dev list",
		"workloads.gantry.dev patch", "workloads.gantry.dev update", "workloads.gantry.dev watch",
		"workloads.gantry.dev/status get",
	}
	leases := []string{"leases.coordination.k8s.io in gantry-system create", "leases.coordination.k8s.io in gantry-system get",
		"leases.coordination.k8s.io in gantry-system update"}
	cases := map[string]struct {
		rules []authorizationv1.ResourceRule
		want  []string
	}{
		"least privilege":                          {rules: leastPrivilege().ResourceRules},
		"cluster-admin":                            {rules: []authorizationv1.ResourceRule{resourceRule("*", "*", "*")}},
		"nothing at all":                           {want: slices.Sorted(slices.Values(append(append([]string{}, all...), leases...)))},
		"the ClusterRoleBinding removed":           {rules: defaultsOnly.ResourceRules, want: all},
		"the lease RoleBinding removed":            {rules: withoutLeases.ResourceRules, want: leases},
		"the logs ClusterRoleBinding removed":      {rules: withoutLogs.ResourceRules},
		"a lease Role for the hub's Lease by name": {rules: plus(withoutLeases, lease("create"), lease("get,update", gantry.HubLeaseName)).ResourceRules},
		"a lease Role for another name": {rules: plus(withoutLeases, lease("create"), lease("get,update", "other")).ResourceRules,
			want: leases[1:]},
		"status by a subresource wildcard": {rules: plus(withoutLeases, lease("*"), resourceRule("gantry.dev,batch", "*/status", "get")).ResourceRules},
		"a verb short": {rules: plus(defaultsOnly, resourceRule("gantry.dev", "workloads,workloads/status,capacityreports", "*"),
			resourceRule("batch", "jobs,jobs/status", "get,list,watch,create,delete"), resourceRule("", "namespaces", "get,create")).ResourceRules,
			want: []string{"jobs.batch patch"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, a := range uncovered(tc.rules) {
				got = append(got, a.what()+" "+a.verb)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("uncovered (-want +got):\n%s", diff)
			}
		})
	}
}

// authorizer answers the hub's reviews as a worker would: a rules review that lists rules (or fails),
// and access reviews that allow all but the denied verbs.
func authorizer(rules authorizationv1.SubjectRulesReviewStatus, rulesErr error, denied ...string) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "selfsubjectrulesreviews", func(k8stesting.Action) (bool, kruntime.Object, error) {
		return true, &authorizationv1.SelfSubjectRulesReview{Status: rules}, rulesErr
	})
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(action k8stesting.Action) (bool, kruntime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		a := review.Spec.ResourceAttributes
		review.Status.Allowed = !slices.Contains(denied, a.Verb+" "+a.Resource)
		return true, review, nil
	})
	return cs
}

// A review on a live connection: the missing rights a rules review shows, confirmed by access reviews,
// refuse the cluster; a token refused says so; a review that fails keeps what the last one said.
func TestClusterReview(t *testing.T) {
	unauthorizedErr := apierrors.NewUnauthorized("Unauthorized")
	timeout := apierrors.NewTimeoutError("slow", 1)
	cases := map[string]struct {
		authz      *fake.Clientset
		reviewed   bool
		wantErr    string
		wantRights Rights
	}{
		"least privilege": {authz: authorizer(leastPrivilege(), nil)},
		"rules the review does not list, allowed by the authorizers": {authz: authorizer(authorizationv1.SubjectRulesReviewStatus{Incomplete: true}, nil),
			wantRights: Rights{Unknown: "the worker's authorizer did not list every rule"}},
		"rights missing": {authz: authorizer(authorizationv1.SubjectRulesReviewStatus{}, nil, "patch jobs", "create namespaces"),
			wantErr:    "the hub's identity lacks rights on the worker: jobs.batch: patch; namespaces: create",
			wantRights: Rights{Missing: []string{"jobs.batch: patch", "namespaces: create"}}},
		"token refused": {authz: authorizer(leastPrivilege(), unauthorizedErr), wantErr: "the worker refuses the hub's token (401)"},
		"review failed at connect": {authz: authorizer(leastPrivilege(), timeout),
			wantRights: Rights{Unknown: "reviewing the hub's rights: " + timeout.Error()}},
		"review failed later": {authz: authorizer(leastPrivilege(), timeout), reviewed: true, wantRights: Rights{Excess: []string{"secrets: get"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &Cluster{authz: tc.authz.AuthorizationV1(), reviewed: tc.reviewed}
			if tc.reviewed {
				c.rights = Rights{Excess: []string{"secrets: get"}}
			}
			err := c.review(context.Background())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("review: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || ReasonOf(err) != gantry.ReasonUnauthorized):
				t.Fatalf("review: %v (%s), want Unauthorized %q", err, ReasonOf(err), tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantRights, c.Rights(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("rights (-want +got):\n%s", diff)
			}
		})
	}
}

// An informer refused (401, or 403 on its list or watch) fails the next check with the first refusal;
// other watch errors do not.
func TestClusterDeny(t *testing.T) {
	c := &Cluster{}
	c.deny(errors.New("watch closed"))
	if err := c.deniedError(); err != nil {
		t.Fatalf("denied after a closed watch: %v", err)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("cannot list"))
	c.deny(fmt.Errorf("failed to list *v1.Job: %w", forbidden))
	c.deny(apierrors.NewUnauthorized("Unauthorized"))
	err := c.deniedError()
	if ReasonOf(err) != gantry.ReasonUnauthorized || !strings.Contains(err.Error(), "lacks rights on the worker: failed to list *v1.Job: jobs.batch is forbidden") {
		t.Fatalf("denied: %v (%s)", err, ReasonOf(err))
	}
}

// The kinds the hub runs on a worker are those discovery lists and the hub may watch, create and delete
// there; batch Jobs always. What the last rules review granted is not asked again.
func TestServedKinds(t *testing.T) {
	jobsets := &metav1.APIResourceList{GroupVersion: "jobset.x-k8s.io/v1alpha2", APIResources: []metav1.APIResource{
		{Name: "jobsets", Kind: "JobSet"}, {Name: "jobsets/status", Kind: "JobSet"}}}
	jobSetRule := rbacv1.PolicyRule{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: []string{"watch", "create", "delete"}}
	cases := map[string]struct {
		served      []*metav1.APIResourceList
		granted     []rbacv1.PolicyRule
		denied      []string
		want        map[gantry.JobKind]bool
		wantReviews int
	}{
		"batch only": {want: map[gantry.JobKind]bool{gantry.JobKindJob: true}},
		"JobSets": {served: []*metav1.APIResourceList{jobsets}, wantReviews: 3,
			want: map[gantry.JobKind]bool{gantry.JobKindJob: true, gantry.JobKindJobSet: true}},
		"JobSets, no right": {served: []*metav1.APIResourceList{jobsets}, denied: []string{"create jobsets"}, wantReviews: 2,
			want: map[gantry.JobKind]bool{gantry.JobKindJob: true, gantry.JobKindJobSet: false}},
		"JobSets, granted by the rules review": {served: []*metav1.APIResourceList{jobsets}, granted: []rbacv1.PolicyRule{jobSetRule},
			want: map[gantry.JobKind]bool{gantry.JobKindJob: true, gantry.JobKindJobSet: true}},
	}
	for name, tc := range cases {
		cs := authorizer(leastPrivilege(), nil, tc.denied...)
		cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = tc.served
		got, err := servedKinds(context.Background(), cs.Discovery(), cs.AuthorizationV1(), tc.granted)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: kinds (-want +got):\n%s", name, diff)
		}
		reviews := 0
		for _, a := range cs.Actions() {
			if a.GetResource().Resource == "selfsubjectaccessreviews" {
				reviews++
			}
		}
		if reviews != tc.wantReviews {
			t.Errorf("%s: %d access reviews, want %d", name, reviews, tc.wantReviews)
		}
	}
}
