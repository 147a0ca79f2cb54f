package remote

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	gantry "github.com/gantry-dev/gantry/apis/v1beta1"
	"github.com/gantry-dev/gantry/internal/workerconfig"
	"github.com/gantry-dev/gantry/internal/workerconfig/workerconfigtest"
)

// fakeWorkerAPI serves what PodLogs reads of a worker: its kube-system namespace, a pod list and a log.
// It counts the identity reads, one per connection made.
type fakeWorkerAPI struct {
	*httptest.Server
	identities atomic.Int32
	token      string
	selector   atomic.Value
}

func newFakeWorkerAPI(t *testing.T, uid types.UID) *fakeWorkerAPI {
	t.Helper()
	f := &fakeWorkerAPI{token: "hub-token"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/kube-system", func(w http.ResponseWriter, _ *http.Request) {
		f.identities.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"`+string(uid)+`"}}`)
	})
	mux.HandleFunc("GET /api/v1/namespaces/team-a/pods", func(w http.ResponseWriter, r *http.Request) {
		f.selector.Store(r.URL.Query().Get("labelSelector"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"train-0","namespace":"team-a"}}]}`)
	})
	mux.HandleFunc("GET /api/v1/namespaces/team-a/pods/train-0/log", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "container="+r.URL.Query().Get("container")+" follow="+r.URL.Query().Get("follow")+"\n")
	})
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// kubeconfig is a token-only kubeconfig for the fake worker.
func (f *fakeWorkerAPI) kubeconfig() string {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
	return strings.NewReplacer(workerconfigtest.BaseServer, f.URL, "ZmFrZQ==", base64.StdEncoding.EncodeToString(ca), "token: abc", "token: "+f.token).Replace(workerconfigtest.Base)
}

func hubReader(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := gantry.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "hub-uid"}},
		&gantry.WorkerCluster{ObjectMeta: metav1.ObjectMeta{Name: "worker-1"},
			Spec: gantry.WorkerClusterSpec{KubeconfigSecretRef: &gantry.SecretReference{Name: "worker-1-kubeconfig"}}})
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func kubeconfigSecret(data string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "worker-1-kubeconfig", Namespace: "gantry-system"},
		Data: map[string][]byte{workerconfig.SecretKey: []byte(data)}}
}

// PodLogs lists a worker's pods and opens their logs through a connection of its own, made once per
// version of the kubeconfig Secret.
func TestPodLogsReadsPodsAndLogs(t *testing.T) {
	worker := newFakeWorkerAPI(t, "worker-uid")
	hub := hubReader(t, kubeconfigSecret(worker.kubeconfig()))
	p := &PodLogs{Hub: hub, Access: &Access{Hub: hub, Namespace: "gantry-system", Policy: workerconfig.Policy{AllowLoopback: true}, HubHost: "https://hub.example:6443"}}
	ctx := context.Background()
	for range 2 {
		pods, err := p.Pods(ctx, "worker-1")
		if err != nil {
			t.Fatal(err)
		}
		list, err := pods.List(ctx, "team-a", labels.SelectorFromSet(labels.Set{"batch.kubernetes.io/job-name": "train"}))
		if err != nil || len(list) != 1 || list[0].Name != "train-0" {
			t.Fatalf("pods %v, %v", list, err)
		}
		if got := worker.selector.Load(); got != "batch.kubernetes.io/job-name=train" {
			t.Errorf("listed with selector %q", got)
		}
		rc, err := pods.Log(ctx, "team-a", "train-0", &corev1.PodLogOptions{Container: "train", Follow: true})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rc)
		_ = rc.Close()
		if string(body) != "container=train follow=true\n" {
			t.Errorf("log %q", body)
		}
	}
	if n := worker.identities.Load(); n != 1 {
		t.Errorf("%d connections made for one Secret version, want 1", n)
	}
	// A rotated Secret makes a new connection.
	var s corev1.Secret
	w := hub.(client.Client)
	if err := w.Get(ctx, types.NamespacedName{Namespace: "gantry-system", Name: "worker-1-kubeconfig"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data[workerconfig.SecretKey] = append(s.Data[workerconfig.SecretKey], '\n')
	if err := w.Update(ctx, &s); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pods(ctx, "worker-1"); err != nil {
		t.Fatal(err)
	}
	if n := worker.identities.Load(); n != 2 {
		t.Errorf("%d connections made after the Secret changed, want 2", n)
	}
}

// What Manager refuses, PodLogs refuses: a missing Secret, a kubeconfig outside the policy, the hub's
// own cluster by address or by identity.
func TestPodLogsRefusesWhatManagerRefuses(t *testing.T) {
	worker := newFakeWorkerAPI(t, "worker-uid")
	hubItself := newFakeWorkerAPI(t, "hub-uid")
	cases := map[string]struct {
		secret     *corev1.Secret
		policy     workerconfig.Policy
		hubHost    string
		wantReason string
		wantError  string
	}{
		"no Secret":            {policy: workerconfig.Policy{AllowLoopback: true}, wantReason: gantry.ReasonSecretNotFound},
		"loopback not allowed": {secret: kubeconfigSecret(worker.kubeconfig()), wantReason: gantry.ReasonInvalidKubeconfig, wantError: "loopback"},
		"an exec plugin": {secret: kubeconfigSecret(strings.Replace(worker.kubeconfig(), "    token: hub-token", workerconfigtest.ExecUser, 1)),
			policy: workerconfig.Policy{AllowLoopback: true}, wantReason: gantry.ReasonInsecureKubeconfig},
		"the hub's address": {secret: kubeconfigSecret(worker.kubeconfig()), policy: workerconfig.Policy{AllowLoopback: true}, hubHost: worker.URL,
			wantReason: gantry.ReasonInvalidKubeconfig, wantError: "the hub's own API server"},
		"the hub under another address": {secret: kubeconfigSecret(hubItself.kubeconfig()), policy: workerconfig.Policy{AllowLoopback: true},
			wantReason: gantry.ReasonInvalidKubeconfig, wantError: "the hub's own API server"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var objs []client.Object
			if tc.secret != nil {
				objs = append(objs, tc.secret)
			}
			host := tc.hubHost
			if host == "" {
				host = "https://hub.example:6443"
			}
			hub := hubReader(t, objs...)
			p := &PodLogs{Hub: hub, Access: &Access{Hub: hub, Namespace: "gantry-system", Policy: tc.policy, HubHost: host}}
			_, err := p.Pods(context.Background(), "worker-1")
			if err == nil || ReasonOf(err) != tc.wantReason || !strings.Contains(err.Error(), tc.wantError) {
				t.Fatalf("error %v (%s), want %s saying %q", err, ReasonOf(err), tc.wantReason, tc.wantError)
			}
		})
	}
}
