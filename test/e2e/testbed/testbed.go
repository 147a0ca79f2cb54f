// Package testbed brings up, opens and tears down the local kwok testbed of hack/dev-up.sh for the
// end-to-end tests and the dispatch benchmark, and audits which Jobs each worker's etcd ever stored.
package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobset "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
)

// HubName names the hub in reports; the workers have the names of their WorkerClusters.
const HubName = "hub"

// WorkerNames lists the workers in order.
var WorkerNames = []string{"worker-1", "worker-2"}

// Cluster is one cluster of the testbed, reached with its admin kubeconfig.
type Cluster struct {
	Name      string
	Config    *rest.Config
	Client    client.Client
	Clientset kubernetes.Interface
	// EtcdURL is the client URL of the cluster's etcd.
	EtcdURL string
}

// Testbed is a running testbed.
type Testbed struct {
	Dir     string
	Hub     *Cluster
	Workers []*Cluster
}

// All returns the hub followed by the workers.
func (tb *Testbed) All() []*Cluster { return append([]*Cluster{tb.Hub}, tb.Workers...) }

// Worker returns the worker of that name, or nil.
func (tb *Testbed) Worker(name string) *Cluster {
	for _, w := range tb.Workers {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// NewScheme returns a scheme with Kubernetes' built-in kinds, Gantry's and JobSet's.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := gantry.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := jobset.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Open connects to the testbed that hack/dev-up.sh runs in dir. qps and burst limit each client.
func Open(dir string, qps float32, burst int) (*Testbed, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	open := func(name, kubeconfig string) (*Cluster, error) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading the kubeconfig of %s: %w", name, err)
		}
		cfg.QPS, cfg.Burst = qps, burst
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("creating a client for %s: %w", name, err)
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("creating a clientset for %s: %w", name, err)
		}
		return &Cluster{Name: name, Config: cfg, Client: c, Clientset: cs}, nil
	}
	tb := &Testbed{Dir: dir}
	for _, n := range append([]string{HubName}, WorkerNames...) {
		c, err := open(n, filepath.Join(dir, n+".kubeconfig"))
		if err != nil {
			return nil, err
		}
		url, err := os.ReadFile(filepath.Join(dir, n+".etcd"))
		if err != nil {
			return nil, fmt.Errorf("reading the etcd URL of %s: %w", n, err)
		}
		c.EtcdURL = strings.TrimSpace(string(url))
		if n == HubName {
			tb.Hub = c
		} else {
			tb.Workers = append(tb.Workers, c)
		}
	}
	return tb, nil
}

// PlacementTimeout is the agents' placement timeout on the e2e testbed: short enough for a test to
// watch an eviction, long enough that pods of admitted jobs are always placed within it here (the
// scheduler binds them within a second or two of their Job's creation, even under the suite's load).
const PlacementTimeout = 15 * time.Second

// leaderElection is the leader election of the testbed's hub and agents: a leader that a test kills or
// pauses is replaced once its lease of 8 s lapses (15 s by default), and a leader still has five tries
// to renew before it gives up.
const leaderElection = "--leader-elect-lease-duration=8s --leader-elect-renew-deadline=5s --leader-elect-retry-period=1s"

// Up runs hack/dev-up.sh for a testbed in dir whose Gantry processes listen on loopback ports from
// portBase (see FreePortBase), with audit logs of writes (Audit). The script's output goes to out.
func Up(ctx context.Context, root, dir string, portBase int, out io.Writer) error {
	return script(ctx, root, "dev-up.sh", dir, out, "GANTRY_DEV_PORT="+strconv.Itoa(portBase), "GANTRY_AUDIT=1",
		"GANTRY_HUB_FLAGS="+leaderElection,
		"GANTRY_AGENT_FLAGS=--placement-timeout="+PlacementTimeout.String()+" "+leaderElection)
}

// Down runs hack/dev-down.sh for the testbed in dir. It does nothing when dir does not exist.
func Down(ctx context.Context, root, dir string, out io.Writer) error {
	return script(ctx, root, "dev-down.sh", dir, out)
}

func script(ctx context.Context, root, name, dir string, out io.Writer, env ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", name))
	cmd.Dir = root
	cmd.Env = append(append(os.Environ(), "GANTRY_DEV_DIR="+dir), env...)
	cmd.Stdout, cmd.Stderr = out, out
	// A script cut short by ctx gets a TERM and some time to stop what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/%s for %s: %w", name, dir, err)
	}
	return nil
}

// DevPorts is how many consecutive loopback ports hack/dev-up.sh takes from GANTRY_DEV_PORT: metrics and
// health probes of the hub and agents on the first six, profiles on the next three, the hub's endpoint on
// the tenth, the JobSet controllers' webhooks, metrics and health probes on the next six, the KubeRay
// operators' metrics and health probes on the next four, the trainers' webhooks, metrics and health
// probes on the last six.
const DevPorts = 26

// FreePortBase returns the first port from start on, in steps of ten, where the DevPorts consecutive
// loopback ports hack/dev-up.sh may take are free.
func FreePortBase(start int) (int, error) {
	for base := start; base < start+500; base += 10 {
		free := true
		for p := base; p < base+DevPorts && free; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				free = false
				continue
			}
			_ = l.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d free consecutive loopback ports in [%d, %d)", DevPorts, start, start+500)
}

// Lock takes an exclusive lock for the testbed directory dir, so that two runs never bring up the same
// testbed at once. The lock file lives in the system's temporary directory, because dev-down removes dir.
func Lock(dir string) (release func(), err error) {
	sum := sha256.Sum256([]byte(dir))
	path := filepath.Join(os.TempDir(), "gantry-testbed-"+hex.EncodeToString(sum[:6])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another run is using the testbed in %s (lock %s)", dir, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
