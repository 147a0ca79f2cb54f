package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/test/doccmd"
)

// docsNamespace is the namespace the docs' examples live in.
const docsNamespace = "team-a"

// TestTheDocsCommandsRunOnTheTestbed reads the docs in a newcomer's order (doccmd.Order) and, as a
// reader would, applies the manifests marked for it, has the hub's API server take the others in a dry
// run, and runs every block of commands that does not say why it cannot run on the testbed: the queue of install.md, the job of jobs.md, and then the commands
// that show, explain, stop, resume and hold them. Each block runs in bash -e with kubectl contexts
// named hub, worker-1 and worker-2 (hub current, namespace team-a) and kubectl-gantry on the PATH, and
// must succeed.
func TestTheDocsCommandsRunOnTheTestbed(t *testing.T) {
	ctx := context.Background()
	if err := tb.Hub.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: docsNamespace}}); err != nil {
		t.Fatal(err)
	}
	dumpOnFailure(t, docsNamespace)
	t.Cleanup(func() {
		_ = tb.Hub.Client.DeleteAllOf(context.Background(), &batchv1.Job{}, client.InNamespace(docsNamespace),
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		for _, gq := range []string{"gpus", "vision", "speech"} { // install.md's and sharing.md's
			_ = tb.Hub.Client.Delete(context.Background(), &gantry.GlobalQueue{ObjectMeta: metav1.ObjectMeta{Name: gq}})
		}
	})
	dir := t.TempDir()
	env := docsEnv(t, dir)
	root := filepath.Join("..", "..")
	ran := 0
	for _, doc := range doccmd.Order {
		blocks, err := doccmd.Read(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			b.File = doc
			switch {
			case b.Marker.Kind == "apply":
				runDocBlock(t, dir, env, b, "kubectl apply --server-side -f - <<'GANTRY_DOC'\n"+b.Text+"\nGANTRY_DOC")
				ran++
			case b.Marker.Kind == "dry-run":
				runDocBlock(t, dir, env, b, "kubectl apply --server-side --dry-run=server -f - <<'GANTRY_DOC'\n"+b.Text+"\nGANTRY_DOC")
				ran++
			case b.IsCommand() && b.Marker.Kind == "":
				runDocBlock(t, dir, env, b, b.Script())
				ran++
			}
		}
	}
	t.Logf("ran %d blocks of the docs", ran)
}

// runDocBlock runs a block's script in dir, for at most a minute, and fails the test unless it succeeds.
func runDocBlock(t *testing.T, dir string, env []string, b doccmd.Block, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s\n--- output:\n%s", b.Where(), err, script, out.String())
	}
	t.Logf("%s (%s):\n%s\n--- output:\n%s", b.Where(), time.Since(start).Round(time.Millisecond), script, out.String())
}

// docsEnv is the environment the docs' commands run in: kubectl of the testbed's tools and
// kubectl-gantry of make build on the PATH, and a kubeconfig in dir with one context per cluster, named
// as the docs name them.
func docsEnv(t *testing.T, dir string) []string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for _, c := range tb.All() {
		cfg, err := clientcmd.LoadFromFile(filepath.Join(tb.Dir, c.Name+".kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		current := cfg.Contexts[cfg.CurrentContext]
		if current == nil {
			t.Fatalf("%s.kubeconfig has no current context", c.Name)
		}
		merged.Clusters[c.Name] = cfg.Clusters[current.Cluster]
		merged.AuthInfos[c.Name] = cfg.AuthInfos[current.AuthInfo]
		merged.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name, Namespace: docsNamespace}
	}
	merged.CurrentContext = tb.Hub.Name
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*merged, path); err != nil {
		t.Fatal(err)
	}
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	return append(os.Environ(), "KUBECONFIG="+path,
		"PATH="+strings.Join([]string{bin, os.Getenv("GANTRY_TOOLS"), os.Getenv("PATH")}, string(os.PathListSeparator)))
}
