package remote

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	gantry "github.com/gantry-dev/gantry/apis/v1alpha1"
)

// hubAccessClusterRules and hubAccessNamespaceRules are the rules of deploy/worker/hub-access.yaml, its
// ClusterRole and its Role in gantry-system; a test keeps them equal to the file.
var (
	hubAccessClusterRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"gantry.dev"}, Resources: []string{"workloads"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"gantry.dev"}, Resources: []string{"workloads/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{"gantry.dev"}, Resources: []string{"capacityreports"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
	}
	hubAccessNamespaceRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}
)

// What Kubernetes' default RBAC policy grants every authenticated user and every service account
// (system:basic-user, system:discovery, system:public-info-viewer,
// system:service-account-issuer-discovery, system:cluster-trust-bundle-discovery): not the hub's doing.
var (
	defaultResourceRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"selfsubjectreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"clustertrustbundles"}, Verbs: []string{"get", "list", "watch"}},
	}
	defaultNonResourceURLs = []string{
		"/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*",
		"/api", "/api/*", "/apis", "/apis/*",
		"/.well-known/openid-configuration", "/.well-known/openid-configuration/", "/openid/v1/jwks", "/openid/v1/jwks/",
	}
)

// maxListed bounds how many excess rights a condition message names.
const maxListed = 10

// Rights is what the worker's authorizer said, at connect, the hub may do beyond the allowlist.
type Rights struct {
	// Excess lists each resource (or non-resource URL) with the verbs beyond the allowlist, sorted.
	Excess []string
	// Unknown says why the review may not tell everything; empty when it does.
	Unknown string
}

// reviewRights asks the worker what the hub may do in gantry-system and cluster-wide: one review
// returns both.
func reviewRights(ctx context.Context, cfg *rest.Config) Rights {
	cl, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return Rights{Unknown: fmt.Sprintf("reviewing the hub's rights: %v", err)}
	}
	review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: gantry.GantryNamespace}}
	review, err = cl.SelfSubjectRulesReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return Rights{Unknown: fmt.Sprintf("reviewing the hub's rights: %v", err)}
	}
	return rightsFrom(review.Status)
}

// rightsFrom compares a rules review with the allowlist.
func rightsFrom(st authorizationv1.SubjectRulesReviewStatus) Rights {
	r := Rights{Excess: excessRights(st.ResourceRules, st.NonResourceRules)}
	if st.Incomplete || st.EvaluationError != "" {
		r.Unknown = "the worker's authorizer did not list every rule"
		if st.EvaluationError != "" {
			r.Unknown += ": " + st.EvaluationError
		}
	}
	return r
}

// excessRights lists what the rules grant beyond the allowlist and the defaults. Wildcards are taken
// literally: the allowlist has none, so a granted "*" is always excess.
func excessRights(rules []authorizationv1.ResourceRule, nonResource []authorizationv1.NonResourceRule) []string {
	extra := map[string]map[string]bool{}
	add := func(what, verb string) {
		if extra[what] == nil {
			extra[what] = map[string]bool{}
		}
		extra[what][verb] = true
	}
	for _, rule := range rules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					if !resourceAllowed(group, resource, verb) {
						add(resourceName(group, resource), verb)
					}
				}
			}
		}
	}
	for _, rule := range nonResource {
		for _, u := range rule.NonResourceURLs {
			for _, verb := range rule.Verbs {
				if verb != "get" || !slices.Contains(defaultNonResourceURLs, u) {
					add("non-resource URL "+u, verb)
				}
			}
		}
	}
	var out []string
	for _, what := range sortedKeys(extra) {
		verbs := sortedKeys(extra[what])
		out = append(out, what+": "+strings.Join(verbs, ", "))
	}
	return out
}

func resourceAllowed(group, resource, verb string) bool {
	for _, rules := range [][]rbacv1.PolicyRule{hubAccessClusterRules, hubAccessNamespaceRules, defaultResourceRules} {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
	}
	return false
}

// resourceName writes a resource as resource.group[/subresource]: secrets, jobs.batch, pods/exec, *.*.
func resourceName(group, resource string) string {
	base, sub, hasSub := strings.Cut(resource, "/")
	if group != "" {
		base += "." + group
	}
	if hasSub {
		base += "/" + sub
	}
	return base
}

// LeastPrivilege returns the LeastPrivilege condition's status, reason and message for the rights.
func LeastPrivilege(r Rights) (metav1.ConditionStatus, string, string) {
	switch {
	case len(r.Excess) > 0:
		msg := "the hub holds more rights on this cluster than deploy/worker/hub-access.yaml grants: " + bounded(r.Excess, maxListed)
		if r.Unknown != "" {
			msg += " (perhaps more: " + r.Unknown + ")"
		}
		return metav1.ConditionFalse, gantry.ReasonExcessRights, msg
	case r.Unknown != "":
		return metav1.ConditionUnknown, gantry.ReasonRightsUnknown, r.Unknown
	}
	return metav1.ConditionTrue, gantry.ReasonAllowlistOnly, "the hub holds only the rights of deploy/worker/hub-access.yaml"
}

func bounded(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:n], "; ") + fmt.Sprintf("; and %d more", len(items)-n)
}
