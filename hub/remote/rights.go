package remote

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
)

// hubAccessClusterRules (with hubAccessPodCheckRules, hubAccessBatchDeleteRules and hubAccessKindRules) and hubAccessNamespaceRules
// are the rules of deploy/worker/hub-access.yaml, its ClusterRole gantry-hub-remote and its Role in
// gantry-system; hubAccessLogRules those of its ClusterRole
// gantry-hub-remote-logs. A test keeps them equal to the file.
var (
	hubAccessClusterRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"gantry.dev"}, Resources: []string{"workloads"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"gantry.dev"}, Resources: []string{"workloads/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{"gantry.dev"}, Resources: []string{"capacityreports"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs/status"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}},
	}
	// hubAccessPodCheckRules let the hub ask a worker, by a dry run, whether it admits a job's pods
	// before it creates the job. The hub's own, in the same ClusterRole, but it connects without them:
	// a worker set up before them runs jobs unjudged.
	hubAccessPodCheckRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}},
	}
	// hubAccessBatchDeleteRules let the hub delete copies and Jobs that go together in one request.
	// The hub's own, in the same ClusterRole, but it connects without them and deletes one by one.
	hubAccessBatchDeleteRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"gantry.dev"}, Resources: []string{"workloads"}, Verbs: []string{"deletecollection"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"deletecollection"}},
	}
	// hubAccessKindRules let the hub run job kinds other than batch Jobs, which a worker may not serve.
	// They are the hub's own, in the same ClusterRole, but the hub connects without them: a worker set
	// up before them still runs batch Jobs, and its informer of a kind refused is reported then.
	hubAccessKindRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"jobset.x-k8s.io"}, Resources: []string{"jobsets"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"ray.io"}, Resources: []string{"rayjobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
		{APIGroups: []string{"trainer.kubeflow.org"}, Resources: []string{"trainjobs"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
	}
	hubAccessNamespaceRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}
	// hubAccessLogRules let the hub's endpoint show the logs of a job's pods. They are the hub's own,
	// not excess, but the hub connects without them: a worker set up before them, or whose operator
	// withholds them, still runs jobs and only shows no logs.
	hubAccessLogRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
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

// Rights is what the worker's authorizer said the hub may do, compared with the allowlist.
type Rights struct {
	// Excess lists each resource (or non-resource URL) with the verbs beyond the allowlist, sorted.
	Excess []string
	// Missing lists each resource with the verbs of the allowlist the hub may not use, sorted; the hub
	// needs all of them.
	Missing []string
	// Unknown says why the review may not tell everything; empty when it does.
	Unknown string
}

// reviewRights asks the worker what the hub may do in gantry-system and cluster-wide: one rules review
// returns both. What the review does not show of the allowlist is asked again right by right, since
// only an access review is the authorizers' last word. It returns the rules the review listed too, so
// that a later question they answer is not asked again. The error is the review's request failing.
func reviewRights(ctx context.Context, authz authorizationv1client.AuthorizationV1Interface) (Rights, []rbacv1.PolicyRule, error) {
	review := &authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: gantry.GantryNamespace}}
	review, err := authz.SelfSubjectRulesReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return Rights{}, nil, fmt.Errorf("reviewing the hub's rights: %w", err)
	}
	r := rightsFrom(review.Status)
	missing := map[string]map[string]bool{}
	for _, a := range uncovered(review.Status.ResourceRules) {
		allowed, err := a.allowed(ctx, authz)
		if err != nil {
			return Rights{}, nil, fmt.Errorf("reviewing the hub's right to %s %s: %w", a.verb, a.what(), err)
		}
		if !allowed {
			add(missing, a.what(), a.verb)
		}
	}
	r.Missing = listed(missing)
	return r, policyRules(review.Status.ResourceRules), nil
}

// access is one request the hub makes on a worker.
type access struct {
	group, resource, subresource, verb, namespace, name string
}

// uncovered lists the requests of the allowlist that no rule of a rules review allows. A rule that
// names objects counts only for the hub's own Lease, the one object of gantry-system it touches.
func uncovered(rules []authorizationv1.ResourceRule) []access {
	granted := policyRules(rules)
	var out []access
	for ns, needed := range map[string][]rbacv1.PolicyRule{"": hubAccessClusterRules, gantry.GantryNamespace: hubAccessNamespaceRules} {
		for _, rule := range needed {
			for _, sub := range rbacvalidation.BreakdownRule(rule) {
				a := access{group: sub.APIGroups[0], verb: sub.Verbs[0], namespace: ns}
				a.resource, a.subresource, _ = strings.Cut(sub.Resources[0], "/")
				if ns != "" && a.verb != "create" && a.verb != "list" && a.verb != "watch" {
					a.name = gantry.HubLeaseName
					sub.ResourceNames = []string{a.name}
				}
				if ok, _ := rbacvalidation.Covers(granted, []rbacv1.PolicyRule{sub}); !ok {
					out = append(out, a)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].what()+" "+out[i].verb < out[j].what()+" "+out[j].verb })
	return out
}

func policyRules(rules []authorizationv1.ResourceRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	for _, r := range rules {
		out = append(out, rbacv1.PolicyRule{APIGroups: r.APIGroups, Resources: r.Resources, Verbs: r.Verbs, ResourceNames: r.ResourceNames})
	}
	return out
}

// allowedBy says whether the hub may make the request: by the rules a review granted, or else by the
// worker's authorizers.
func (a access) allowedBy(ctx context.Context, granted []rbacv1.PolicyRule, authz authorizationv1client.AuthorizationV1Interface) (bool, error) {
	res := a.resource
	if a.subresource != "" {
		res += "/" + a.subresource
	}
	need := rbacv1.PolicyRule{APIGroups: []string{a.group}, Resources: []string{res}, Verbs: []string{a.verb}}
	if a.name != "" {
		need.ResourceNames = []string{a.name}
	}
	if ok, _ := rbacvalidation.Covers(granted, []rbacv1.PolicyRule{need}); ok {
		return true, nil
	}
	return a.allowed(ctx, authz)
}

// what names the resource as the condition messages do: jobs.batch, leases.coordination.k8s.io in
// gantry-system.
func (a access) what() string {
	res := a.resource
	if a.subresource != "" {
		res += "/" + a.subresource
	}
	if a.namespace == "" {
		return resourceName(a.group, res)
	}
	return resourceName(a.group, res) + " in " + a.namespace
}

// allowed asks the worker's authorizers whether the hub may make the request.
func (a access) allowed(ctx context.Context, authz authorizationv1client.AuthorizationV1Interface) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: a.namespace, Verb: a.verb, Group: a.group,
			Resource: a.resource, Subresource: a.subresource, Name: a.name},
	}}
	review, err := authz.SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return review.Status.Allowed, nil
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
	for _, rule := range rules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				for _, verb := range rule.Verbs {
					if !resourceAllowed(group, resource, verb) {
						add(extra, resourceName(group, resource), verb)
					}
				}
			}
		}
	}
	for _, rule := range nonResource {
		for _, u := range rule.NonResourceURLs {
			for _, verb := range rule.Verbs {
				if verb != "get" || !slices.Contains(defaultNonResourceURLs, u) {
					add(extra, "non-resource URL "+u, verb)
				}
			}
		}
	}
	return listed(extra)
}

// add records a verb on what: a resource, a non-resource URL.
func add(verbs map[string]map[string]bool, what, verb string) {
	if verbs[what] == nil {
		verbs[what] = map[string]bool{}
	}
	verbs[what][verb] = true
}

// listed writes each what with its verbs, "jobs.batch: create, get", sorted.
func listed(verbs map[string]map[string]bool) []string {
	var out []string
	for _, what := range slices.Sorted(maps.Keys(verbs)) {
		out = append(out, what+": "+strings.Join(slices.Sorted(maps.Keys(verbs[what])), ", "))
	}
	return out
}

func resourceAllowed(group, resource, verb string) bool {
	for _, rules := range [][]rbacv1.PolicyRule{hubAccessClusterRules, hubAccessPodCheckRules, hubAccessBatchDeleteRules, hubAccessKindRules, hubAccessNamespaceRules, hubAccessLogRules, defaultResourceRules} {
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

// refusedToken is the error of a worker that answers 401: the token expired or was revoked.
func refusedToken() *workerconfig.ConfigError {
	return &workerconfig.ConfigError{Reason: gantry.ReasonUnauthorized,
		Message: "the worker refuses the hub's token (401); a valid one in the kubeconfig Secret is picked up at once"}
}

// lacksRights is the error of a worker that does not let the hub do what it needs.
func lacksRights(what string) *workerconfig.ConfigError {
	return &workerconfig.ConfigError{Reason: gantry.ReasonUnauthorized, Message: "the hub's identity lacks rights on the worker: " + what}
}

// unauthorized turns an answer 401 into the error that says so; other errors are returned as they are.
func unauthorized(err error) error {
	if apierrors.IsUnauthorized(err) {
		return refusedToken()
	}
	return err
}
