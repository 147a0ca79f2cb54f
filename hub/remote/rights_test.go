package remote

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// The Go allowlist is the file's: a rule added to one and not the other fails here.
func TestAllowlistIsHubAccessYAML(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "worker", "hub-access.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var clusterRules, namespaceRules []rbacv1.PolicyRule
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
			clusterRules = append(clusterRules, obj.Rules...)
		case "Role":
			if obj.Metadata.Namespace != gantry.GantryNamespace {
				t.Errorf("Role %s is in namespace %q; the rights review looks at %s", obj.Metadata.Name, obj.Metadata.Namespace, gantry.GantryNamespace)
			}
			namespaceRules = append(namespaceRules, obj.Rules...)
		}
	}
	if diff := cmp.Diff(clusterRules, hubAccessClusterRules); diff != "" {
		t.Errorf("ClusterRole rules of hub-access.yaml (-) and hubAccessClusterRules (+) differ:\n%s", diff)
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
	for _, r := range append(append(append([]rbacv1.PolicyRule{}, hubAccessNamespaceRules...), hubAccessClusterRules...), defaultResourceRules...) {
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
	st.ResourceRules = append(st.ResourceRules, rules...)
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
