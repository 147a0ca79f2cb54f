package testbed

import (
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestAPodsCommandLineIsTheKubelets(t *testing.T) {
	pod := Pod{Flags: map[string]string{"metrics-bind-address": "127.0.0.1:9000"}}
	c := corev1.Container{Args: []string{"--cluster-name=$(CLUSTER)", "--metrics-bind-address=:8080", "--keep=$(UNSET)"}}
	got := pod.commandLine(v1.Config{Entrypoint: []string{"/gantry-agent"}}, c, [][2]string{{"CLUSTER", "worker-2"}})
	want := []string{"/gantry-agent", "--cluster-name=worker-2", "--keep=$(UNSET)", "--metrics-bind-address=127.0.0.1:9000"}
	if !slices.Equal(got, want) {
		t.Errorf("command line %q, want %q", got, want)
	}
	c.Command = []string{"/other"}
	if got := pod.commandLine(v1.Config{Entrypoint: []string{"/gantry-agent"}}, c, nil); got[0] != "/other" {
		t.Errorf("the container's command did not replace the image's entrypoint: %q", got)
	}
}

func TestAPodsUserAndCapabilitiesAreItsSecurityContexts(t *testing.T) {
	podSC := &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532)}
	u, err := containerUser(podSC, &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000)}, "0:0")
	if err != nil || u.UID != 1000 || u.GID != 65532 {
		t.Errorf("user %+v (%v), want the container's uid over the pod's, the pod's gid", u, err)
	}
	if u, err := containerUser(nil, nil, "65532:65532"); err != nil || u.UID != 65532 {
		t.Errorf("user %+v (%v), want the image's", u, err)
	}
	if _, err := containerUser(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, nil, "0:0"); err == nil {
		t.Error("runAsNonRoot with the root user was accepted")
	}
	if _, err := containerUser(nil, nil, "nonroot"); err == nil || !strings.Contains(err.Error(), "uid:gid") {
		t.Errorf("an image user by name: %v, want an error", err)
	}
	caps, err := capabilities(&corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"},
		Add: []corev1.Capability{"NET_BIND_SERVICE"}}})
	if err != nil || !slices.Equal(caps.Effective, []string{"CAP_NET_BIND_SERVICE"}) || caps.Inheritable != nil {
		t.Errorf("capabilities %+v (%v), want only the one added", caps, err)
	}
	if _, err := capabilities(&corev1.SecurityContext{}); err == nil {
		t.Error("a container that keeps the default capabilities was accepted")
	}
}
