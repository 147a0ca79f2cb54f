package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// A tenant who may not list Workloads in every namespace gets the positions the hub's visibility API
// counts among every namespace's, not among its own namespace's alone; without the API it is told.
func TestATenantsPositionsComeFromTheHub(t *testing.T) {
	var pendingNames []string
	for _, o := range fleet() {
		if wl, ok := o.(*gantry.Workload); ok && wl.Namespace == "team-a" {
			if state, _ := view.StateOf(wl); state == view.StatePending {
				pendingNames = append(pendingNames, wl.Name)
			}
		}
	}
	if len(pendingNames) == 0 {
		t.Fatal("the fleet has no pending Workload in team-a")
	}
	ep := newFakeEndpoint(t)
	ep.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Path != "/apis/visibility.gantry.dev/v1beta1/namespaces/team-a/pendingworkloads" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusForbidden)
			return
		}
		list := visibility.PendingWorkloadList{}
		for i, name := range pendingNames {
			w := visibility.PendingWorkload{Queue: "q", GlobalQueue: "gq", PositionInGlobalQueue: 41 + i, PendingInGlobalQueue: 99}
			w.Namespace, w.Name = "team-a", name
			list.Items = append(list.Items, w)
		}
		_ = json.NewEncoder(w).Encode(list)
	})
	tenant := func(extra ...client.Object) client.WithWatch {
		return fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(append(fleet(), extra...)...).
			WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					lo := (&client.ListOptions{}).ApplyOptions(opts)
					if _, positional := list.(*gantry.WorkloadList); positional && lo.Namespace == "" {
						return apierrors.NewForbidden(schema.GroupResource{Group: "gantry.dev", Resource: "workloads"}, "", nil)
					}
					return c.List(ctx, list, opts...)
				},
			}).Build()
	}
	token := kubeconfigFile(t, "    token: tok")
	out, errOut := runAs(t, tenant(ep.configMap()), "workloads", "-n", "team-a", "--kubeconfig", token)
	if !strings.Contains(out, "41/99") || strings.Contains(errOut, "Positions count only") {
		t.Errorf("with the visibility API: stdout\n%s\nstderr\n%s", out, errOut)
	}
	_, errOut = runAs(t, tenant(), "workloads", "-n", "team-a", "--kubeconfig", token)
	if !strings.Contains(errOut, "Positions count only the workloads of namespace team-a") || !strings.Contains(errOut, "advertises no endpoint") {
		t.Errorf("without it: stderr\n%s", errOut)
	}
}

// runAs runs kubectl gantry against c, returning stdout and stderr apart.
func runAs(t *testing.T, c client.WithWatch, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{Out: &out, ErrOut: &errOut})
	o.NewClient = func() (client.WithWatch, error) { return c, nil }
	o.Now = func() time.Time { return start.Add(time.Hour) }
	cmd := NewRootCommand(o)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("kubectl gantry %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String()
}
