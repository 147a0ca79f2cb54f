package helmchart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/gantry-dev/gantry/hub/remote"
)

func clusterProfileValues(command string) map[string]any {
	return map[string]any{"role": "hub", "hub": map[string]any{"clusterProfiles": map[string]any{
		"providers": []any{map[string]any{"name": "open-cluster-management", "profileSourcedEnvVarsPolicy": "AppendIfNotExists",
			"execConfig": map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "command": command,
				"args": []any{"--managed-serviceaccount=gantry-hub"}, "provideClusterInfo": true}}},
		"pluginVolumes": []any{map[string]any{"name": "plugins", "mountPath": "/plugins",
			"volume": map[string]any{"persistentVolumeClaim": map[string]any{"claimName": "credential-plugins"}}}},
	}}}
}

// With providers, the hub reads a provider file the hub's own loader accepts, from a ConfigMap mounted
// read-only, with the plugins' volume beside it; a changed file rolls the hub's pods.
func TestClusterProfileProviders(t *testing.T) {
	objs := render(t, clusterProfileValues("/plugins/cp-creds"))
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap gantry-system/gantry-hub-clusterprofile-providers", &cm)
	file := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(file, []byte(cm.Data["providers.json"]), 0o600); err != nil {
		t.Fatal(err)
	}
	providers, err := remote.LoadProviders(file)
	if err != nil {
		t.Fatalf("the hub would refuse the rendered file: %v\n%s", err, cm.Data["providers.json"])
	}
	if !slices.Equal(providers.Names(), []string{"open-cluster-management"}) {
		t.Errorf("providers %v", providers.Names())
	}
	pod := deployments(t, objs)["gantry-hub"].Spec.Template
	c := pod.Spec.Containers[0]
	if !slices.Contains(c.Args, "--clusterprofile-provider-file=/etc/gantry/clusterprofile/providers.json") {
		t.Errorf("hub args %v", c.Args)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	if m := mounts["clusterprofile-providers"]; m.MountPath != "/etc/gantry/clusterprofile" || !m.ReadOnly {
		t.Errorf("provider file mount %+v", m)
	}
	if m := mounts["plugins"]; m.MountPath != "/plugins" || !m.ReadOnly {
		t.Errorf("plugin mount %+v", m)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes["plugins"]; v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "credential-plugins" {
		t.Errorf("plugin volume %+v", v)
	}
	if v := volumes["clusterprofile-providers"]; v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
		t.Errorf("provider file volume %+v", v)
	}
	sum := pod.Annotations["gantry.dev/clusterprofile-providers"]
	other := deployments(t, render(t, clusterProfileValues("/plugins/other")))["gantry-hub"].Spec.Template.Annotations["gantry.dev/clusterprofile-providers"]
	if sum == "" || sum == other {
		t.Errorf("provider file annotations %q and %q: a changed file must roll the pods", sum, other)
	}
}

// Without providers there is no provider file, but the hub may read ClusterProfiles in its namespace:
// it watches them once an inventory installs their CRD.
func TestClusterProfilesWithoutProviders(t *testing.T) {
	objs := render(t, roleValues["hub"])
	for _, k := range keys(objs) {
		if strings.Contains(k, "clusterprofile") {
			t.Errorf("%s rendered without providers", k)
		}
	}
	for _, a := range deployments(t, objs)["gantry-hub"].Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--clusterprofile") {
			t.Errorf("arg %s without providers", a)
		}
	}
	var role rbacv1.Role
	find(t, objs, "Role gantry-system/gantry-hub", &role)
	if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Equal(r.APIGroups, []string{"multicluster.x-k8s.io"}) && slices.Equal(r.Resources, []string{"clusterprofiles"}) &&
			slices.Equal(r.Verbs, []string{"get", "list", "watch"})
	}) {
		t.Errorf("the hub's Role does not let it read ClusterProfiles: %+v", role.Rules)
	}
}
