package helmchart

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// endpointValues turn the hub's endpoint on, advertised, behind a NetworkPolicy.
var endpointValues = map[string]any{
	"role": "hub",
	"hub": map[string]any{"endpoint": map[string]any{"enabled": true, "page": true, "port": 9443, "tls": map[string]any{"secretName": "gantry-endpoint-tls"},
		"advertiseURL": "https://gantry.example.com:9443", "caBundle": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		"service": map[string]any{"type": "LoadBalancer", "annotations": map[string]any{"lb": "internal"}}}},
	"networkPolicy": map[string]any{"enabled": true},
}

func find(t *testing.T, objs []*unstructured.Unstructured, k string, into any) {
	t.Helper()
	for _, u := range objs {
		if key(u) == k {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			return
		}
	}
	t.Fatalf("%s not rendered", k)
}

// Off by default, the endpoint adds nothing: no flag, port, Service or right.
func TestEndpointIsOffByDefault(t *testing.T) {
	objs := render(t, roleValues["hub"])
	for _, k := range keys(objs) {
		if strings.Contains(k, "endpoint") || strings.Contains(k, "auth-delegator") {
			t.Errorf("%s rendered with the endpoint off", k)
		}
	}
	hub := deployments(t, objs)["gantry-hub"].Spec.Template.Spec
	for _, a := range hub.Containers[0].Args {
		if strings.HasPrefix(a, "--endpoint") {
			t.Errorf("arg %s with the endpoint off", a)
		}
	}
	if len(hub.Volumes) > 0 || len(hub.Containers[0].Ports) != 2 {
		t.Errorf("volumes %v, ports %v", hub.Volumes, hub.Containers[0].Ports)
	}
}

// On, the hub serves HTTPS with the Secret's certificate on its port, behind a Service and a
// NetworkPolicy of its own; it may review tokens and access; users may read where it is.
func TestEndpointOn(t *testing.T) {
	objs := render(t, endpointValues)
	hub := deployments(t, objs)["gantry-hub"].Spec.Template.Spec
	c := hub.Containers[0]
	for _, a := range []string{"--endpoint-bind-address=:9443", "--endpoint-tls-cert-file=/etc/gantry/endpoint-tls/tls.crt",
		"--endpoint-tls-key-file=/etc/gantry/endpoint-tls/tls.key", "--endpoint-page"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("hub args %v lack %s", c.Args, a)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "endpoint" && p.ContainerPort == 9443 }) {
		t.Errorf("ports %v", c.Ports)
	}
	if len(hub.Volumes) != 1 || hub.Volumes[0].Secret == nil || hub.Volumes[0].Secret.SecretName != "gantry-endpoint-tls" ||
		len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/gantry/endpoint-tls" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volumes %+v, mounts %+v", hub.Volumes, c.VolumeMounts)
	}
	var svc corev1.Service
	find(t, objs, "Service gantry-system/gantry-hub-endpoint", &svc)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Ports[0].Port != 9443 || svc.Spec.Ports[0].TargetPort.StrVal != "endpoint" ||
		svc.Annotations["lb"] != "internal" || svc.Spec.Selector["app.kubernetes.io/component"] != "hub" {
		t.Errorf("Service %+v", svc)
	}
	var binding rbacv1.ClusterRoleBinding
	find(t, objs, "ClusterRoleBinding /gantry-hub-auth-delegator", &binding)
	if binding.RoleRef.Name != "system:auth-delegator" || binding.Subjects[0].Name != "gantry-hub" {
		t.Errorf("binding %+v", binding)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap gantry-system/gantry-hub-endpoint", &cm)
	if cm.Data["url"] != "https://gantry.example.com:9443" || !strings.HasPrefix(cm.Data["ca.crt"], "-----BEGIN CERTIFICATE-----\nMIIB\n") {
		t.Errorf("ConfigMap data %v", cm.Data)
	}
	var role rbacv1.Role
	find(t, objs, "Role gantry-system/gantry-hub-endpoint-reader", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].ResourceNames, []string{"gantry-hub-endpoint"}) || !slices.Equal(role.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("Role rules %+v", role.Rules)
	}
	var rb rbacv1.RoleBinding
	find(t, objs, "RoleBinding gantry-system/gantry-hub-endpoint-reader", &rb)
	if rb.Subjects[0].Kind != rbacv1.GroupKind || rb.Subjects[0].Name != "system:authenticated" {
		t.Errorf("RoleBinding subjects %+v", rb.Subjects)
	}
	if !slices.Contains(keys(objs), "NetworkPolicy gantry-system/gantry-hub-endpoint") {
		t.Error("no NetworkPolicy for the endpoint's port")
	}
}

// Unadvertised, the endpoint serves but no ConfigMap says where.
func TestEndpointUnadvertised(t *testing.T) {
	objs := render(t, map[string]any{"role": "both", "agent": map[string]any{"clusterName": "w"},
		"hub": map[string]any{"endpoint": map[string]any{"enabled": true, "tls": map[string]any{"secretName": "tls"}}}})
	ks := keys(objs)
	if !slices.Contains(ks, "Service gantry-system/gantry-hub-endpoint") || slices.Contains(ks, "ConfigMap gantry-system/gantry-hub-endpoint") {
		t.Errorf("rendered %v", ks)
	}
}

// An operator may keep the hub from reading pod logs on a worker; the hub's other rights stay.
func TestWorkerWithoutPodLogs(t *testing.T) {
	ks := keys(render(t, map[string]any{"role": "agent", "agent": map[string]any{"clusterName": "w"}, "workerAccess": map[string]any{"podLogs": false}}))
	if slices.Contains(ks, "ClusterRole /gantry-hub-remote-logs") || slices.Contains(ks, "ClusterRoleBinding /gantry-hub-remote-logs") ||
		!slices.Contains(ks, "ClusterRole /gantry-hub-remote") {
		t.Errorf("rendered %v", ks)
	}
}
