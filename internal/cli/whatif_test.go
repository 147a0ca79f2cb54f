package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	visibility "github.com/gantry-dev/gantry/apis/visibility/v1beta1"
	"github.com/gantry-dev/gantry/internal/view"
)

// whatIfRequest is what the fake endpoint was asked.
type whatIfRequest struct {
	method, path, contentType, body string
}

// newWhatIfEndpoint answers what-if requests as the hub's endpoint does: a WhatIf in namespaces it
// knows, 403 in namespace forbidden and 409 in namespace taken.
func newWhatIfEndpoint(t *testing.T, answer *visibility.WhatIf) (*fakeEndpoint, *whatIfRequest) {
	t.Helper()
	ep := newFakeEndpoint(t)
	var last whatIfRequest
	ep.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		last = whatIfRequest{method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"), body: string(body)}
		switch {
		case r.Header.Get("Authorization") != "Bearer tok":
			http.Error(w, "no bearer token", http.StatusUnauthorized)
		case strings.Contains(r.URL.Path, "/namespaces/forbidden/"):
			http.Error(w, "me may not create jobs.batch in namespace forbidden", http.StatusForbidden)
		case strings.Contains(r.URL.Path, "/namespaces/taken/"):
			http.Error(w, "Job taken/train is submitted already: kubectl gantry explain job train -n taken says what became of it", http.StatusConflict)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(answer)
		}
	})
	return ep, &last
}

// runWhatIf runs kubectl gantry with args and stdin against a hub that holds objs.
func runWhatIf(t *testing.T, objs []client.Object, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut})
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build()
	o.NewClient = func() (client.WithWatch, error) { return c, nil }
	cmd := NewRootCommand(o)
	cmd.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func TestWhatIfCommand(t *testing.T) {
	answer := &visibility.WhatIf{JobKind: "Job", Workload: "job-train", Queue: "gpu", GlobalQueue: "gpus",
		Decision: visibility.DecisionDispatch, Nominated: []string{"worker-1"}, PositionInGlobalQueue: 1, PendingInGlobalQueue: 1,
		Clusters: []visibility.WhatIfCluster{{Name: "worker-1", Candidate: true, WithinQuota: true}}}
	answer.APIVersion, answer.Kind = visibility.Group+"/"+visibility.Version, visibility.WhatIfKind
	answer.Namespace, answer.Name = "team-a", "train"
	ep, last := newWhatIfEndpoint(t, answer)
	token := kubeconfigFile(t, "    token: tok")
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	job := "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n  labels: {gantry.dev/queue: gpu}\nspec: {}\n"
	inTeamB := "---\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: train\n  namespace: team-b\nspec: {}\n"
	inForbidden := strings.Replace(inTeamB, "team-b", "forbidden", 1)
	text := view.WhatIfText(answer)
	cases := map[string]struct {
		args     []string
		stdin    string
		body     string // sent, when not the file
		wantPath string
		want     string // in what is printed
		wantErr  string
	}{
		"the kubeconfig's namespace": {args: []string{"-f", file("job.yaml", job)}, body: job, wantPath: "team-a", want: text},
		"--namespace":                {args: []string{"-f", file("job.yaml", job), "-n", "team-c"}, body: job, wantPath: "team-c", want: text},
		"the file's namespace":       {args: []string{"-f", file("b.yaml", inTeamB)}, body: inTeamB, wantPath: "team-b", want: text},
		"the file's and --namespace agreeing": {args: []string{"-f", file("b.yaml", inTeamB), "-n", "team-b"}, body: inTeamB,
			wantPath: "team-b", want: text},
		"the standard input": {args: []string{"-f", "-"}, stdin: job, body: job, wantPath: "team-a", want: text},
		"-o json":            {args: []string{"-f", file("job.yaml", job), "-o", "json"}, body: job, wantPath: "team-a", want: `"kind": "WhatIf"`},
		"-o yaml":            {args: []string{"-f", file("job.yaml", job), "-o", "yaml"}, body: job, wantPath: "team-a", want: "decision: Dispatch\n"},
		"no -f":              {args: nil, wantErr: `required flag(s) "filename" not set`},
		"a bad -o":           {args: []string{"-f", file("job.yaml", job), "-o", "wide"}, wantErr: `bad --output "wide": want one of table, json, yaml`},
		"two objects": {args: []string{"-f", file("two.yaml", job+"---\n"+job)},
			wantErr: "holds 2 objects: whatif takes one job, so give each its own file"},
		"nothing":        {args: []string{"-f", file("empty.yaml", "---\n# nothing\n")}, wantErr: "holds no object"},
		"no such file":   {args: []string{"-f", filepath.Join(dir, "missing.yaml")}, wantErr: "no such file"},
		"two namespaces": {args: []string{"-f", file("b.yaml", inTeamB), "-n", "team-a"}, wantErr: "the job's metadata.namespace is team-b and --namespace is team-a"},
		"refused (403)":  {args: []string{"-f", file("f.yaml", inForbidden)}, wantErr: "the hub's endpoint answers 403 Forbidden: me may not create jobs.batch in namespace forbidden"},
		"already there (409)": {args: []string{"-f", file("job.yaml", job), "-n", "taken"},
			wantErr: "answers 409 Conflict: Job taken/train is submitted already: kubectl gantry explain job train -n taken says what became of it"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			*last = whatIfRequest{}
			args := append([]string{"whatif", "--kubeconfig", token, "--hub-endpoint", ep.URL, "--hub-endpoint-ca", file("ca.crt", string(ep.caPEM()))}, tc.args...)
			out, err := runWhatIf(t, nil, tc.stdin, args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("printed\n%s\nwant it to hold\n%s", out, tc.want)
			}
			want := whatIfRequest{method: http.MethodPost, path: "/apis/visibility.gantry.dev/v1beta1/namespaces/" + tc.wantPath + "/whatif",
				contentType: "application/yaml", body: tc.body}
			if *last != want {
				t.Errorf("asked %+v, want %+v", *last, want)
			}
		})
	}
}

// The endpoint's address and CA come from the hub's ConfigMap when no flag names them, as for logs.
func TestWhatIfCommandFindsTheAdvertisedEndpoint(t *testing.T) {
	answer := &visibility.WhatIf{JobKind: "Job", Decision: visibility.DecisionWait, Reason: "WaitingForQuota"}
	ep, last := newWhatIfEndpoint(t, answer)
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte("kind: Job\nmetadata: {name: train}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runWhatIf(t, []client.Object{ep.configMap()}, "", "whatif", "-f", path, "--kubeconfig", kubeconfigFile(t, "    token: tok"))
	if err != nil || !strings.Contains(out, "Decision:   Wait (WaitingForQuota)") {
		t.Fatalf("printed %q, error %v", out, err)
	}
	if last.path != "/apis/visibility.gantry.dev/v1beta1/namespaces/team-a/whatif" {
		t.Errorf("asked %s", last.path)
	}
}
