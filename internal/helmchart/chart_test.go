package helmchart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var (
	chartDir  = filepath.Join("..", "..", "deploy", "charts", "gantry")
	deployDir = filepath.Join("..", "..", "deploy")
)

// roleValues are the least a user passes for each role.
var roleValues = map[string]map[string]any{
	"hub":   {"role": "hub"},
	"agent": {"role": "agent", "agent": map[string]any{"clusterName": "worker-1"}},
	"both":  {"role": "both", "agent": map[string]any{"clusterName": "worker-1"}},
}

// nonDefault turns on every optional part and changes every kind of value.
var nonDefault = map[string]any{
	"role":             "both",
	"namespace":        map[string]any{"create": true, "podSecurityLevel": "baseline"},
	"image":            map[string]any{"registry": "registry.example/gantry", "tag": "v9.9.9", "pullPolicy": "Always"},
	"imagePullSecrets": []any{map[string]any{"name": "pull"}},
	"logLevel":         "debug",
	"hub": map[string]any{"replicas": 3, "leaderElect": false, "admissionPolicies": false, "workloadWorkers": 8,
		"allowLoopbackWorkers": true, "extraArgs": []any{"--pprof-bind-address=:6060"},
		"nodeSelector": map[string]any{"pool": "system"}, "priorityClassName": "system-cluster-critical",
		"tolerations": []any{map[string]any{"key": "system", "operator": "Exists"}}},
	"agent": map[string]any{"clusterName": "gpu-east", "replicas": 2, "reservationTTL": "90s",
		"starvationTimeout": "10m", "placementTimeout": "0", "podAnnotations": map[string]any{"team": "ml"}},
	"workerAccess": map[string]any{"longLivedToken": true},
	"metrics": map[string]any{"service": true, "serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prom"}}, "prometheusRule": map[string]any{"enabled": true},
		"dashboard": map[string]any{"enabled": true, "labels": map[string]any{"team": "ops"}, "annotations": map[string]any{"grafana_folder": "Gantry"}}},
	"networkPolicy": map[string]any{"enabled": true},
}

func render(t *testing.T, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	ch, err := Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Render(ch, Namespace, values)
	if err != nil {
		t.Fatalf("rendering %v: %v", values, err)
	}
	objs, err := Objects(docs)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

func keys(objs []*unstructured.Unstructured) []string {
	var ks []string
	for _, u := range objs {
		ks = append(ks, key(u))
	}
	slices.Sort(ks)
	return ks
}

func TestLintStrict(t *testing.T) {
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range map[string]map[string]any{"hub": roleValues["hub"], "agent": roleValues["agent"],
		"both": roleValues["both"], "non-default": nonDefault, "endpoint": endpointValues} {
		lint := action.NewLint()
		lint.Strict, lint.Namespace, lint.KubeVersion = true, Namespace, kv
		res := lint.Run([]string{chartDir}, values)
		if res.TotalChartsLinted != 1 || len(res.Errors) > 0 {
			t.Errorf("%s: %d charts linted, errors %v", name, res.TotalChartsLinted, res.Errors)
		}
	}
}

// A worker may run the oldest Kubernetes the chart supports: role agent renders there, without the
// pod-group policy (an API of 1.36); the hub's roles refuse a cluster older than 1.36, saying why.
func TestRolesOnOlderKubernetes(t *testing.T) {
	ch, err := Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := RenderFor(ch, Namespace, roleValues["agent"], OldestWorkerKubeVersion)
	if err != nil {
		t.Fatalf("role agent on %s: %v", OldestWorkerKubeVersion, err)
	}
	objs, err := Objects(docs)
	if err != nil {
		t.Fatal(err)
	}
	got := keys(objs)
	if slices.Contains(got, "MutatingAdmissionPolicy /gantry-pod-group") || !slices.Contains(got, "Deployment gantry-system/gantry-agent") {
		t.Errorf("role agent on %s renders\n%s\nwant the agent without the pod-group policy", OldestWorkerKubeVersion, strings.Join(got, "\n"))
	}
	for _, role := range []string{"hub", "both"} {
		_, err := RenderFor(ch, Namespace, roleValues[role], "v1.35.4")
		if err == nil || !strings.Contains(err.Error(), "need Kubernetes 1.36 or later") {
			t.Errorf("role %s on 1.35: %v, want a refusal that says the hub needs 1.36", role, err)
		}
	}
	if _, err := RenderFor(ch, Namespace, roleValues["agent"], "v1.32.9"); err == nil {
		t.Errorf("role agent on 1.32 rendered; the chart supports workers from 1.33 on")
	}
}

// Each role installs its own part and nothing of the others.
func TestRolesRenderTheirParts(t *testing.T) {
	hub := []string{"ClusterRole /gantry-hub", "ClusterRole /gantry-view", "ClusterRole /gantry-edit", "ClusterRoleBinding /gantry-hub", "Deployment gantry-system/gantry-hub",
		"MutatingAdmissionPolicy /gantry-queued-jobs", "MutatingAdmissionPolicyBinding /gantry-queued-jobs",
		"MutatingAdmissionPolicy /gantry-queued-suspended", "MutatingAdmissionPolicyBinding /gantry-queued-suspended",
		"ValidatingAdmissionPolicy /gantry-queued-suspended-held", "ValidatingAdmissionPolicyBinding /gantry-queued-suspended-held",
		"PodDisruptionBudget gantry-system/gantry-hub", "Role gantry-system/gantry-hub", "RoleBinding gantry-system/gantry-hub",
		"Service gantry-system/gantry-hub-metrics", "ServiceAccount gantry-system/gantry-hub",
		"ValidatingAdmissionPolicy /gantry-job-placement", "ValidatingAdmissionPolicyBinding /gantry-job-placement",
		"ValidatingAdmissionPolicy /gantry-queued-job-fixed", "ValidatingAdmissionPolicyBinding /gantry-queued-job-fixed"}
	agent := []string{"ClusterRole /gantry-agent", "ClusterRole /gantry-hub-remote", "ClusterRole /gantry-hub-remote-logs", "ClusterRoleBinding /gantry-agent",
		"ClusterRoleBinding /gantry-hub-remote", "ClusterRoleBinding /gantry-hub-remote-logs", "ConfigMap gantry-system/gantry-agent", "Deployment gantry-system/gantry-agent",
		"PodDisruptionBudget gantry-system/gantry-agent", "Role gantry-system/gantry-agent-leader-election",
		"Role gantry-system/gantry-hub-remote", "RoleBinding gantry-system/gantry-agent-leader-election",
		"RoleBinding gantry-system/gantry-hub-remote", "Service gantry-system/gantry-agent-metrics",
		"ServiceAccount gantry-system/gantry-agent", "ServiceAccount gantry-system/gantry-hub-remote",
		"MutatingAdmissionPolicy /gantry-pod-group", "MutatingAdmissionPolicyBinding /gantry-pod-group"}
	// What scrapes the metrics of either program is bound to the one reader role.
	hub, agent = append(hub, "ClusterRole /gantry-metrics-reader"), append(agent, "ClusterRole /gantry-metrics-reader")
	want := map[string][]string{"hub": hub, "agent": agent, "both": append(slices.Clone(hub), agent[:len(agent)-1]...)}
	for role, values := range roleValues {
		got := keys(render(t, values))
		w := slices.Clone(want[role])
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("role %s renders\n%s\nwant\n%s", role, strings.Join(got, "\n"), strings.Join(w, "\n"))
		}
	}
}

// Every Deployment meets the restricted Pod Security level and runs what the values say.
func TestDeploymentsAreRestrictedAndLeaderElected(t *testing.T) {
	for _, d := range deployments(t, render(t, roleValues["both"])) {
		pod := d.Spec.Template.Spec
		c := pod.Containers[0]
		psc, sc := pod.SecurityContext, c.SecurityContext
		if psc == nil || sc == nil || !*psc.RunAsNonRoot || *psc.RunAsUser != 65532 ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
			*sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: security contexts %+v %+v", d.Name, psc, sc)
		}
		if !slices.Contains(c.Args, "--leader-elect=true") || !slices.Contains(c.Args, "--namespace=gantry-system") {
			t.Errorf("%s: args %v", d.Name, c.Args)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: probes or resources missing: %+v", d.Name, c)
		}
		if c.Image != "ghcr.io/gantry-dev/"+d.Name+":v0.2.0" {
			t.Errorf("%s: image %s", d.Name, c.Image)
		}
		wantReplicas := map[string]int32{"gantry-hub": 2, "gantry-agent": 1}[d.Name]
		if *d.Spec.Replicas != wantReplicas {
			t.Errorf("%s: %d replicas, want %d", d.Name, *d.Spec.Replicas, wantReplicas)
		}
	}
}

func deployments(t *testing.T, objs []*unstructured.Unstructured) map[string]*appsv1.Deployment {
	t.Helper()
	out := map[string]*appsv1.Deployment{}
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, d, true); err != nil {
			t.Fatalf("%s: %v", u.GetName(), err)
		}
		out[d.Name] = d
	}
	if len(out) == 0 {
		t.Fatal("no Deployment rendered")
	}
	return out
}

func TestNonDefaultValues(t *testing.T) {
	objs := render(t, nonDefault)
	ks := keys(objs)
	for _, want := range []string{"Namespace /gantry-system", "Secret gantry-system/gantry-hub-remote-token",
		"ServiceMonitor gantry-system/gantry-hub", "ServiceMonitor gantry-system/gantry-agent", "PrometheusRule gantry-system/gantry",
		"NetworkPolicy gantry-system/gantry-hub", "NetworkPolicy gantry-system/gantry-agent", "ConfigMap gantry-system/gantry-dashboard"} {
		if !slices.Contains(ks, want) {
			t.Errorf("missing %s", want)
		}
	}
	if slices.Contains(ks, "MutatingAdmissionPolicy /gantry-queued-jobs") {
		t.Error("hub.admissionPolicies=false still renders the policies")
	}
	ds := deployments(t, objs)
	hub, agent := ds["gantry-hub"], ds["gantry-agent"]
	if *hub.Spec.Replicas != 3 || *agent.Spec.Replicas != 2 {
		t.Errorf("replicas %d, %d", *hub.Spec.Replicas, *agent.Spec.Replicas)
	}
	hc, ac := hub.Spec.Template.Spec.Containers[0], agent.Spec.Template.Spec.Containers[0]
	for _, a := range []string{"--leader-elect=false", "--workload-workers=8", "--allow-loopback-workers",
		"--pprof-bind-address=:6060", "--zap-log-level=debug"} {
		if !slices.Contains(hc.Args, a) {
			t.Errorf("hub args %v lack %s", hc.Args, a)
		}
	}
	for _, a := range []string{"--reservation-ttl=90s", "--starvation-timeout=10m", "--placement-timeout=0"} {
		if !slices.Contains(ac.Args, a) {
			t.Errorf("agent args %v lack %s", ac.Args, a)
		}
	}
	if hc.Image != "registry.example/gantry/gantry-hub:v9.9.9" || hc.ImagePullPolicy != corev1.PullAlways ||
		hub.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" || hub.Spec.Template.Spec.NodeSelector["pool"] != "system" ||
		len(hub.Spec.Template.Spec.Tolerations) != 1 || hub.Spec.Template.Spec.ImagePullSecrets[0].Name != "pull" ||
		agent.Spec.Template.Annotations["team"] != "ml" {
		t.Errorf("hub pod %+v, agent annotations %v", hub.Spec.Template.Spec, agent.Spec.Template.Annotations)
	}
	checkMonitoringObjects(t, objs)
	checkDashboard(t, objs)
}

// The dashboard's ConfigMap carries the file as it is, labelled for Grafana's sidecar.
func checkDashboard(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(chartDir, "dashboards", "gantry.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if key(u) != "ConfigMap gantry-system/gantry-dashboard" {
			continue
		}
		got, _, _ := unstructured.NestedString(u.Object, "data", "gantry.json")
		if got != strings.TrimSpace(string(want)) || !json.Valid([]byte(got)) {
			t.Errorf("the dashboard's ConfigMap does not hold dashboards/gantry.json as it is")
		}
		if l := u.GetLabels(); l["grafana_dashboard"] != "1" || l["team"] != "ops" || u.GetAnnotations()["grafana_folder"] != "Gantry" {
			t.Errorf("dashboard labels %v, annotations %v", l, u.GetAnnotations())
		}
		return
	}
	t.Error("no dashboard ConfigMap")
}

// The Prometheus Operator's objects decode strictly into its own types: no field is misspelled.
func checkMonitoringObjects(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		var into any
		switch u.GetKind() {
		case "ServiceMonitor":
			into = &monitoringv1.ServiceMonitor{}
		case "PrometheusRule":
			into = &monitoringv1.PrometheusRule{}
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
			t.Errorf("%s: %v", key(u), err)
		}
		if sm, ok := into.(*monitoringv1.ServiceMonitor); ok && (sm.Labels["release"] != "prom" || sm.Spec.Endpoints[0].Port != "metrics") {
			t.Errorf("%s: %+v", key(u), sm)
		}
		if pr, ok := into.(*monitoringv1.PrometheusRule); ok && len(pr.Spec.Groups) != 2 {
			t.Errorf("%s: groups %+v", key(u), pr.Spec.Groups)
		}
	}
}

// Bad values are refused with a message that names what to fix.
func TestBadValuesAreRefused(t *testing.T) {
	ch, err := Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, namespace string
		values          map[string]any
		want            string
	}{
		{"unknown role", Namespace, map[string]any{"role": "worker"}, "role"},
		{"agent without cluster name", Namespace, map[string]any{"role": "agent"}, "needs agent.clusterName"},
		{"agent outside gantry-system", "gantry", roleValues["agent"], "install with --namespace gantry-system"},
		{"misspelled key", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"replica": 3}}, "replica"},
		{"cluster name not an object name", Namespace, map[string]any{"role": "agent", "agent": map[string]any{"clusterName": "GPU_East"}}, "clusterName"},
		{"no replicas", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"replicas": 0}}, "replicas"},
		{"bad duration", Namespace, map[string]any{"role": "agent", "agent": map[string]any{"clusterName": "w", "placementTimeout": "ten minutes"}}, "placementTimeout"},
		{"extra arg without dashes", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"extraArgs": []any{"leader-elect=false"}}}, "extraArgs"},
		{"endpoint without its Secret", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"endpoint": map[string]any{"enabled": true}}},
			"hub.endpoint.enabled needs hub.endpoint.tls.secretName"},
		{"endpoint advertised but off", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"endpoint": map[string]any{"advertiseURL": "https://gantry.example.com"}}},
			"turn it on with hub.endpoint.enabled"},
		{"endpoint advertised over http", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"endpoint": map[string]any{"enabled": true,
			"tls": map[string]any{"secretName": "tls"}, "advertiseURL": "http://gantry.example.com"}}}, "advertiseURL"},
		{"provider without plugin", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"clusterProfiles": map[string]any{
			"providers": []any{map[string]any{"name": "ocm"}}}}}, "execConfig"},
		{"plugin volume at a relative path", Namespace, map[string]any{"role": "hub", "hub": map[string]any{"clusterProfiles": map[string]any{
			"pluginVolumes": []any{map[string]any{"name": "p", "mountPath": "plugins", "volume": map[string]any{"emptyDir": map[string]any{}}}}}}}, "mountPath"},
	} {
		_, err := Render(ch, tc.namespace, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

func TestChartCRDsAreDeployCRDs(t *testing.T) {
	want, err := filepath.Glob(filepath.Join(deployDir, "crd", "gantry.dev_*.yaml"))
	if err != nil || len(want) == 0 {
		t.Fatalf("no CRDs in deploy/crd: %v", err)
	}
	got, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("the chart has %d CRDs, deploy/crd %d", len(got), len(want))
	}
	for _, f := range want {
		a, errA := os.ReadFile(f)
		b, errB := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(f)))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs in the chart (%v, %v): run make manifests", filepath.Base(f), errA, errB)
		}
	}
}

// kustomize builds each overlay of deploy/ into the objects the chart installs for that role, with the
// CRDs, less the agent's ConfigMap that each worker writes itself.
func TestKustomizeOverlaysAreTheChart(t *testing.T) {
	for overlay, role := range map[string]string{"hub": "hub", "worker": "agent", "both": "both"} {
		values := map[string]any{"namespace": map[string]any{"create": true}}
		for k, v := range roleValues[role] {
			values[k] = v
		}
		want := map[string]*unstructured.Unstructured{}
		for _, u := range append(render(t, values), crds(t)...) {
			if key(u) != "ConfigMap gantry-system/gantry-agent" {
				want[key(u)] = u
			}
		}
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(deployDir, "overlays", overlay))
		if err != nil {
			t.Fatalf("kustomize build deploy/overlays/%s: %v", overlay, err)
		}
		got := map[string]*unstructured.Unstructured{}
		for _, r := range res.Resources() {
			m, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: m}
			got[key(u)] = u
		}
		if !slices.Equal(sortedKeys(got), sortedKeys(want)) {
			t.Errorf("overlay %s builds\n%s\nthe chart renders\n%s", overlay, strings.Join(sortedKeys(got), "\n"), strings.Join(sortedKeys(want), "\n"))
			continue
		}
		for k, u := range want {
			a, _ := yaml.Marshal(u.Object)
			b, _ := yaml.Marshal(got[k].Object)
			if !bytes.Equal(a, b) {
				t.Errorf("overlay %s: %s differs from the chart's:\n%s\nchart:\n%s", overlay, k, b, a)
			}
		}
	}
}

func crds(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Users' roles reach Gantry's kinds by aggregation: view (and edit, admin) reads them, only edit and
// admin manage Queues, and nothing grants more.
func TestUserRolesAggregateIntoKubernetesRoles(t *testing.T) {
	objs := render(t, roleValues["hub"])
	var view, edit rbacv1.ClusterRole
	find(t, objs, "ClusterRole /gantry-view", &view)
	find(t, objs, "ClusterRole /gantry-edit", &edit)
	for _, to := range []string{"view", "edit", "admin"} {
		if view.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] != "true" {
			t.Errorf("gantry-view does not aggregate to %s: %v", to, view.Labels)
		}
	}
	if edit.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "" || edit.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" {
		t.Errorf("gantry-edit labels %v: want edit and admin, not view", edit.Labels)
	}
	for _, r := range view.Rules {
		if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("gantry-view grants %v", r.Verbs)
		}
	}
	if len(edit.Rules) != 1 || !slices.Equal(edit.Rules[0].Resources, []string{"queues"}) {
		t.Errorf("gantry-edit rules %+v: want Queues only", edit.Rules)
	}
}

// The hub reads Gantry's kinds and writes their status; readers of its cluster-wide kinds read every
// one that kubectl gantry shows.
func TestRolesCoverGantrysKinds(t *testing.T) {
	objs := render(t, roleValues["hub"])
	var hub, view rbacv1.ClusterRole
	find(t, objs, "ClusterRole /gantry-hub", &hub)
	find(t, objs, "ClusterRole /gantry-view", &view)
	for _, r := range []string{"workloads", "globalqueues", "queues", "cohorts", "workerclusters", "workerclustersets"} {
		for _, verb := range []string{"get", "list", "watch"} {
			if !grants(hub.Rules, verb, r) {
				t.Errorf("gantry-hub may not %s %s", verb, r)
			}
		}
		if !grants(hub.Rules, "update", r+"/status") {
			t.Errorf("gantry-hub may not update %s/status", r)
		}
	}
	for _, r := range []string{"workloads", "queues", "globalqueues", "cohorts", "workerclusters"} {
		if !grants(view.Rules, "list", r) {
			t.Errorf("gantry-view may not list %s", r)
		}
	}
}

// grants tells whether one of the rules lets verb act on the gantry.dev resource.
func grants(rules []rbacv1.PolicyRule, verb, resource string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, "gantry.dev") && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb)
	})
}
