package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/prometheus/procfs"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/gantry-dev/gantry/internal/ociarchive"
)

// Pod is one of a Deployment's pods as the testbed runs it: its first container, from an image
// archive, under runc, with the pod's arguments, environment, ServiceAccount token and security
// context. kwok only pretends to run pods; this runs the image for real. Unlike a pod it shares the
// host's network, because the testbed's API servers listen on loopback: Flags move the container's
// listening ports to the testbed's.
type Pod struct {
	Cluster  *Cluster
	Template corev1.PodTemplateSpec
	// Namespace is the Deployment's: the ServiceAccount's and the pod's own.
	Namespace string
	// Image is the path of an OCI image layout archive (make images).
	Image string
	// Flags are set on the command line over the container's arguments, as --name=value.
	Flags map[string]string
}

// runcPath is the runc the testbed runs containers with: GANTRY_RUNC, else runc on PATH.
func runcPath() (string, error) {
	if p := os.Getenv("GANTRY_RUNC"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("runc")
	if err != nil {
		return "", fmt.Errorf("no runc to run images with (hack/install-debian.sh runc installs Debian's): %w", err)
	}
	return p, nil
}

// StartPod runs the pod as the testbed process name: a runc container whose bundle is
// Dir/containers/<name>. Stopping the process (SIGTERM to runc) stops the container's process.
func (tb *Testbed) StartPod(ctx context.Context, name string, pod Pod) (*Process, error) {
	runc, err := runcPath()
	if err != nil {
		return nil, err
	}
	bundle := filepath.Join(tb.Dir, "containers", name)
	if err := os.RemoveAll(bundle); err != nil {
		return nil, err
	}
	idx, _, err := ociarchive.Open(pod.Image, filepath.Join(bundle, "image"))
	if err != nil {
		return nil, err
	}
	img, err := ociarchive.RootFS(idx, v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, filepath.Join(bundle, "rootfs"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pod.Image, err)
	}
	spec, err := pod.runtimeSpec(ctx, img.Config, bundle, name)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", name, err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		return nil, err
	}
	return tb.Start(name, []string{runc, "--root", tb.runcRoot(), "run", "--bundle", bundle, tb.containerID(name)})
}

func (tb *Testbed) runcRoot() string { return filepath.Join(tb.Dir, "runc") }

// containerID is unique on the host: runc's cgroups are the host's, whatever its state directory.
func (tb *Testbed) containerID(name string) string {
	return "gantry-e2e-" + strconv.Itoa(tb.portBase()) + "-" + name
}

func (tb *Testbed) portBase() int {
	u, err := url.Parse(tb.Hub.Config.Host)
	if err != nil {
		return 0
	}
	port, _ := strconv.Atoi(u.Port())
	return port
}

// runtimeSpec is the OCI runtime configuration of the pod's first container: the image's entrypoint
// with the container's arguments, the pod's security context, a read-only bind of its ServiceAccount
// token where client-go's in-cluster configuration reads it, and the memory limit as a cgroup limit.
func (pod Pod) runtimeSpec(ctx context.Context, img v1.Config, bundle, hostname string) (*specs.Spec, error) {
	spec := pod.Template.Spec
	if len(spec.Containers) == 0 {
		return nil, fmt.Errorf("the template has no container")
	}
	c := spec.Containers[0]
	env, err := pod.environment(ctx, c)
	if err != nil {
		return nil, err
	}
	user, err := containerUser(spec.SecurityContext, c.SecurityContext, img.User)
	if err != nil {
		return nil, err
	}
	caps, err := capabilities(c.SecurityContext)
	if err != nil {
		return nil, err
	}
	tokenDir := filepath.Join(bundle, "serviceaccount")
	if err := pod.writeServiceAccount(ctx, spec.ServiceAccountName, tokenDir); err != nil {
		return nil, err
	}
	sc := ptr.Deref(c.SecurityContext, corev1.SecurityContext{})
	process := &specs.Process{
		User:            user,
		Args:            pod.commandLine(img, c, env),
		Env:             envList(env),
		Cwd:             "/",
		NoNewPrivileges: !ptr.Deref(sc.AllowPrivilegeEscalation, true),
		Capabilities:    caps,
	}
	return &specs.Spec{
		Version:  specs.Version,
		Process:  process,
		Root:     &specs.Root{Path: "rootfs", Readonly: ptr.Deref(sc.ReadOnlyRootFilesystem, false)},
		Hostname: hostname,
		Mounts:   containerMounts(tokenDir),
		Linux:    containerLinux(c.Resources),
	}, nil
}

// environment is the container's environment as the kubelet gives it: the in-cluster API server's
// address (here the cluster's loopback one), then each variable, from a value, a ConfigMap key or the
// pod's namespace.
func (pod Pod) environment(ctx context.Context, c corev1.Container) ([][2]string, error) {
	u, err := url.Parse(pod.Cluster.Config.Host)
	if err != nil {
		return nil, err
	}
	env := [][2]string{{"PATH", "/usr/local/bin:/usr/bin:/bin"},
		{"KUBERNETES_SERVICE_HOST", u.Hostname()}, {"KUBERNETES_SERVICE_PORT", u.Port()}}
	for _, e := range c.Env {
		value, err := pod.envValue(ctx, e, env)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		env = append(env, [2]string{e.Name, value})
	}
	return env, nil
}

func (pod Pod) envValue(ctx context.Context, e corev1.EnvVar, before [][2]string) (string, error) {
	from := e.ValueFrom
	switch {
	case from == nil:
		return expand(e.Value, before), nil
	case from.ConfigMapKeyRef != nil:
		var cm corev1.ConfigMap
		if err := pod.Cluster.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: from.ConfigMapKeyRef.Name}, &cm); err != nil {
			return "", err
		}
		v, ok := cm.Data[from.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("ConfigMap %s has no key %s", from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key)
		}
		return v, nil
	case from.FieldRef != nil && from.FieldRef.FieldPath == "metadata.namespace":
		return pod.Namespace, nil
	}
	return "", fmt.Errorf("the testbed does not resolve %+v", *from)
}

// expand replaces each $(NAME) of a variable defined before, as the kubelet does in arguments and values.
func expand(s string, env [][2]string) string {
	for _, kv := range env {
		s = strings.ReplaceAll(s, "$("+kv[0]+")", kv[1])
	}
	return s
}

func envList(env [][2]string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		out = append(out, kv[0]+"="+kv[1])
	}
	return out
}

// commandLine is the image's entrypoint (or the container's command) with the container's arguments,
// variables expanded, and pod.Flags set over them.
func (pod Pod) commandLine(img v1.Config, c corev1.Container, env [][2]string) []string {
	args := slices.Clone(img.Entrypoint)
	if len(c.Command) > 0 {
		args = slices.Clone(c.Command)
	}
	for _, a := range c.Args {
		args = append(args, expand(a, env))
	}
	for flag, value := range pod.Flags {
		args = slices.DeleteFunc(args, func(a string) bool { return a == "--"+flag || strings.HasPrefix(a, "--"+flag+"=") })
		args = append(args, "--"+flag+"="+value)
	}
	return args
}

// containerUser is the user the security context names, the container's over the pod's, else the image's.
func containerUser(podSC *corev1.PodSecurityContext, sc *corev1.SecurityContext, image string) (specs.User, error) {
	uid, gid := (*int64)(nil), (*int64)(nil)
	nonRoot := false
	if podSC != nil {
		uid, gid, nonRoot = podSC.RunAsUser, podSC.RunAsGroup, ptr.Deref(podSC.RunAsNonRoot, false)
	}
	if sc != nil {
		uid, gid = cmpOr(sc.RunAsUser, uid), cmpOr(sc.RunAsGroup, gid)
		nonRoot = ptr.Deref(sc.RunAsNonRoot, nonRoot)
	}
	if uid == nil || gid == nil {
		imgUID, imgGID, ok := strings.Cut(image, ":")
		u, uerr := strconv.ParseInt(imgUID, 10, 64)
		g, gerr := strconv.ParseInt(imgGID, 10, 64)
		if !ok || uerr != nil || gerr != nil {
			return specs.User{}, fmt.Errorf("the image's user %q is not uid:gid", image)
		}
		uid, gid = cmpOr(uid, &u), cmpOr(gid, &g)
	}
	if nonRoot && *uid == 0 {
		return specs.User{}, fmt.Errorf("runAsNonRoot, and the user is root")
	}
	return specs.User{UID: uint32(*uid), GID: uint32(*gid)}, nil
}

func cmpOr(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

// capabilities are the ones the security context adds; it must drop ALL, as the chart's do.
func capabilities(sc *corev1.SecurityContext) (*specs.LinuxCapabilities, error) {
	if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		return nil, fmt.Errorf("the container does not drop ALL capabilities")
	}
	caps := []string{}
	for _, c := range sc.Capabilities.Add {
		caps = append(caps, "CAP_"+string(c))
	}
	return &specs.LinuxCapabilities{Bounding: caps, Effective: caps, Permitted: caps}, nil
}

// writeServiceAccount writes what the kubelet projects into a pod: a token of its ServiceAccount, the
// cluster's CA and the namespace.
func (pod Pod) writeServiceAccount(ctx context.Context, sa, dir string) error {
	tr, err := pod.Cluster.Clientset.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}},
		metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("a token of %s: %w", sa, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{"token": []byte(tr.Status.Token), "ca.crt": pod.Cluster.Config.CAData,
		"namespace": []byte(pod.Namespace)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func containerMounts(tokenDir string) []specs.Mount {
	return append(systemMounts(),
		specs.Mount{Destination: "/var/run/secrets/kubernetes.io/serviceaccount", Type: "bind", Source: tokenDir,
			Options: []string{"rbind", "ro"}})
}

// systemMounts are the kernel's file systems a container runtime mounts into every container.
func systemMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts",
			Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

// containerLinux: the pod's own pid, IPC, UTS and mount namespaces (the host's network), the kernel's
// files masked as container runtimes mask them, and the memory limit.
func containerLinux(res corev1.ResourceRequirements) *specs.Linux {
	linux := &specs.Linux{
		Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
			{Type: specs.UTSNamespace}, {Type: specs.MountNamespace}},
		MaskedPaths: []string{"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
			"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"},
		ReadonlyPaths: []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
	}
	if limit, ok := res.Limits[corev1.ResourceMemory]; ok {
		linux.Resources = &specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: ptr.To(limit.Value())}}
	}
	return linux
}

// ContainerProcess is what the kernel says of a pod's running process.
type ContainerProcess struct {
	UID, GID     uint64
	CapEff       uint64
	NoNewPrivs   bool
	ReadOnlyRoot bool
	Executable   string
	// MemoryLimit is the limit of the process's memory cgroup in bytes, 0 for none.
	MemoryLimit int64
}

// InspectPod reads the kernel's view of the process a pod started by StartPod runs.
func (tb *Testbed) InspectPod(name string) (ContainerProcess, error) {
	runc, err := runcPath()
	if err != nil {
		return ContainerProcess{}, err
	}
	out, err := exec.Command(runc, "--root", tb.runcRoot(), "state", tb.containerID(name)).Output()
	if err != nil {
		return ContainerProcess{}, fmt.Errorf("runc state %s: %w", name, err)
	}
	var state specs.State
	if err := json.Unmarshal(out, &state); err != nil {
		return ContainerProcess{}, err
	}
	return inspectProcess(state.Pid)
}

func inspectProcess(pid int) (ContainerProcess, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ContainerProcess{}, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return ContainerProcess{}, err
	}
	exe, err := p.Executable()
	if err != nil {
		return ContainerProcess{}, err
	}
	mounts, err := p.MountInfo()
	if err != nil {
		return ContainerProcess{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ContainerProcess{}, err
	}
	cp := ContainerProcess{UID: st.UIDs[1], GID: st.GIDs[1], CapEff: st.CapEff, Executable: exe,
		NoNewPrivs: strings.Contains(string(status), "NoNewPrivs:\t1")}
	for _, m := range mounts {
		if m.MountPoint == "/" {
			_, cp.ReadOnlyRoot = m.Options["ro"]
		}
	}
	cp.MemoryLimit, err = memoryLimit(p)
	return cp, err
}

// memoryLimit reads the limit of the process's memory cgroup, v1 or v2, from the host's hierarchy.
func memoryLimit(p procfs.Proc) (int64, error) {
	groups, err := p.Cgroups()
	if err != nil {
		return 0, err
	}
	for _, g := range groups {
		file := ""
		switch {
		case slices.Contains(g.Controllers, "memory"):
			file = filepath.Join("/sys/fs/cgroup/memory", g.Path, "memory.limit_in_bytes")
		case g.HierarchyID == 0:
			file = filepath.Join("/sys/fs/cgroup", g.Path, "memory.max")
		default:
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || limit >= 1<<62 {
			return 0, nil // "max", or v1's page-rounded maximum: no limit
		}
		return limit, nil
	}
	return 0, nil
}
