package memworker

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"

	"github.com/gantry-dev/gantry/deploy/worker"
	"github.com/gantry-dev/gantry/internal/manifest"
)

// Who sent a write, as Writes counts them: the hub (its kubeconfig's token), the harness and tests (the
// admin token of Config), or the fake agent (in process).
const (
	ClientHub   = "hub"
	ClientAdmin = "admin"
	ClientAgent = "agent"
)

// user is an identity the server knows, with the rules it holds: by namespace, "" for cluster-wide.
type user struct {
	name, client string
	clusterRules []rbacv1.PolicyRule
	// namespaceRules hold only in their namespace.
	namespaceRules map[string][]rbacv1.PolicyRule
	nonResource    []rbacv1.PolicyRule
}

// Every authenticated user may review its own access and read discovery, version and health, as
// Kubernetes' default roles allow.
var (
	everyoneRules = []rbacv1.PolicyRule{{APIGroups: []string{"authorization.k8s.io"},
		Resources: []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews"}, Verbs: []string{"create"}}}
	everyoneURLs = []rbacv1.PolicyRule{{Verbs: []string{"get"},
		NonResourceURLs: []string{"/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/version", "/version/"}}}
)

func admin() *user {
	all := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	return &user{name: "system:admin", client: ClientAdmin, clusterRules: all,
		nonResource: []rbacv1.PolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}}}
}

// rulesIn are the resource rules that hold in the namespace ("" for requests of no namespace).
func (u *user) rulesIn(namespace string) []rbacv1.PolicyRule {
	out := slices.Concat(u.clusterRules, everyoneRules)
	if namespace != "" {
		out = append(out, u.namespaceRules[namespace]...)
	}
	return out
}

// allows is the server's authorizer, RBAC's rules applied to one request; reviews answer by it too.
func (u *user) allows(a authorizationv1.ResourceAttributes) bool {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	need := rbacv1.PolicyRule{APIGroups: []string{a.Group}, Resources: []string{res}, Verbs: []string{a.Verb}}
	if a.Name != "" {
		need.ResourceNames = []string{a.Name}
	}
	ok, _ := rbacvalidation.Covers(u.rulesIn(a.Namespace), []rbacv1.PolicyRule{need})
	return ok
}

func (u *user) allowsPath(verb, path string) bool {
	ok, _ := rbacvalidation.Covers(slices.Concat(u.nonResource, everyoneURLs),
		[]rbacv1.PolicyRule{{Verbs: []string{verb}, NonResourceURLs: []string{path}}})
	return ok
}

// rulesReview is what a SelfSubjectRulesReview of the namespace answers.
func (u *user) rulesReview(namespace string) authorizationv1.SubjectRulesReviewStatus {
	var st authorizationv1.SubjectRulesReviewStatus
	for _, r := range u.rulesIn(namespace) {
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups,
			Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	for _, r := range slices.Concat(u.nonResource, everyoneURLs) {
		st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
	}
	return st
}

// hubUser is the ServiceAccount of deploy/worker/hub-access.yaml with exactly the rules its bindings
// there give it, as a worker where the chart installed the hub's access holds them.
func hubUser() (*user, error) {
	objs, err := manifest.Decode(worker.HubAccess)
	if err != nil {
		return nil, fmt.Errorf("reading hub-access.yaml: %w", err)
	}
	var sa *unstructured.Unstructured
	roles := map[string][]rbacv1.PolicyRule{} // by kind/namespace/name
	var bindings []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			sa = o
		case "ClusterRole", "Role":
			var role struct {
				Rules []rbacv1.PolicyRule `json:"rules"`
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &role); err != nil {
				return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			roles[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = role.Rules
		case "ClusterRoleBinding", "RoleBinding":
			bindings = append(bindings, o)
		}
	}
	if sa == nil {
		return nil, fmt.Errorf("hub-access.yaml makes no ServiceAccount")
	}
	u := &user{name: "system:serviceaccount:" + sa.GetNamespace() + ":" + sa.GetName(), client: ClientHub,
		namespaceRules: map[string][]rbacv1.PolicyRule{}}
	for _, b := range bindings {
		if err := u.bind(b, sa, roles); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// bind adds the rules of a binding that names the ServiceAccount: a ClusterRoleBinding's everywhere, a
// RoleBinding's in its namespace.
func (u *user) bind(b, sa *unstructured.Unstructured, roles map[string][]rbacv1.PolicyRule) error {
	var binding rbacv1.RoleBinding // a ClusterRoleBinding has the same fields
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(b.Object, &binding); err != nil {
		return fmt.Errorf("%s %s: %w", b.GetKind(), b.GetName(), err)
	}
	names := slices.ContainsFunc(binding.Subjects, func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Name == sa.GetName() && s.Namespace == sa.GetNamespace()
	})
	if !names {
		return nil
	}
	roleNamespace := ""
	if binding.RoleRef.Kind == "Role" {
		roleNamespace = b.GetNamespace()
	}
	rules, ok := roles[binding.RoleRef.Kind+"/"+roleNamespace+"/"+binding.RoleRef.Name]
	if !ok {
		return fmt.Errorf("%s %s binds %s %s, which hub-access.yaml does not make", b.GetKind(), b.GetName(), binding.RoleRef.Kind, binding.RoleRef.Name)
	}
	if b.GetKind() == "ClusterRoleBinding" {
		u.clusterRules = append(u.clusterRules, rules...)
	} else {
		u.namespaceRules[b.GetNamespace()] = append(u.namespaceRules[b.GetNamespace()], rules...)
	}
	return nil
}

// authenticator knows each user by its bearer token.
type authenticator struct {
	tokens map[string]*user
}

func newToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return hex.EncodeToString(b)
}

// user returns who sent the request; false when its token is missing or unknown.
func (a *authenticator) user(r *http.Request) (*user, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return nil, false
	}
	for known, u := range a.tokens {
		if subtle.ConstantTimeCompare([]byte(token), []byte(known)) == 1 {
			return u, true
		}
	}
	return nil, false
}
