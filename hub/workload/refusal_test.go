package workload

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A worker's final answer to a create is told from a failure that may pass: rights, quota, the network.
func TestRefusedByWorker(t *testing.T) {
	trainjobs := schema.GroupResource{Group: "trainer.kubeflow.org", Resource: "trainjobs"}
	forbidden := func(msg string) error {
		err := apierrors.NewForbidden(trainjobs, "finetune", errors.New("x"))
		err.ErrStatus.Message = msg
		return err
	}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"invalid (schema, CEL, admission policy)": {
			apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "train", field.ErrorList{field.Required(field.NewPath("spec"), "")}), true},
		"bad request": {apierrors.NewBadRequest("the server rejected our request"), true},
		"a webhook's denial with 403": {forbidden(`admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: ` +
			`spec.RuntimeRef: Invalid value: ...: specified trainingRuntime must be created before the TrainJob is created`), true},
		"an admission policy's denial with 403": {forbidden(`ValidatingAdmissionPolicy 'no-jobs' with binding 'no-jobs' denied request: not here`), true},
		"wrapped by the client":                 {fmt.Errorf("creating on worker-1: %w", forbidden(`admission webhook "v.example" denied the request: no`)), true},
		"RBAC":                                  {forbidden(`trainjobs.trainer.kubeflow.org "finetune" is forbidden: User "system:serviceaccount:gantry-system:gantry-hub-remote" cannot create resource "trainjobs"`), false},
		"an exhausted ResourceQuota":            {forbidden(`pods "p" is forbidden: exceeded quota: compute, requested: nvidia.com/gpu=8, used: nvidia.com/gpu=8, limited: nvidia.com/gpu=8`), false},
		"a namespace being deleted":             {forbidden(`unable to create new content in namespace team-a because it is being terminated`), false},
		"a timeout":                             {apierrors.NewTimeoutError("slow", 1), false},
		"not an API error":                      {errors.New("connection refused"), false},
	}
	for name, tc := range cases {
		if got := refusedByWorker(tc.err); got != tc.want {
			t.Errorf("%s: refusedByWorker = %v, want %v", name, got, tc.want)
		}
	}
}

// A dry run of a job's pods is refused for good by what refuses such pods (a LimitRange, PodSecurity, a
// policy), for now by an exhausted quota; the hub's own lack of rights, and a template the pod's
// validation finds incomplete, are not judged.
func TestPodRefusal(t *testing.T) {
	forbidden := func(msg string) error {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "train-main-", errors.New("x"))
		err.ErrStatus.Message = msg
		return err
	}
	invalid := func(msg string) error {
		err := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "train-main-", nil)
		err.ErrStatus.Message = msg
		return err
	}
	cases := map[string]struct {
		err            error
		refused, final bool
	}{
		"admitted":                    {nil, false, false},
		"a LimitRange":                {forbidden(`pods "train-main-x" is forbidden: minimum cpu usage per Container is 200m, but request is 100m`), true, true},
		"PodSecurity":                 {forbidden(`pods "train-main-x" is forbidden: violates PodSecurity "restricted:latest": runAsNonRoot != true`), true, true},
		"a quota that needs limits":   {forbidden(`pods "train-main-x" is forbidden: failed quota: compute: must specify limits.cpu for: main`), true, true},
		"an exhausted quota":          {forbidden(`pods "train-main-x" is forbidden: exceeded quota: compute, requested: cpu=1, used: cpu=8, limited: cpu=8`), true, false},
		"a namespace being deleted":   {forbidden(`unable to create new content in namespace ns because it is being terminated`), true, false},
		"the hub may not create pods": {forbidden(`pods "train-main-" is forbidden: User "system:serviceaccount:gantry-system:gantry-hub-remote" cannot create resource "pods" in API group "" in the namespace "ns"`), false, false},
		"a policy on pods":            {invalid(`ValidatingAdmissionPolicy 'no-gpu-here' with binding 'b' denied request: no GPUs in this namespace`), true, true},
		"an incomplete template":      {invalid(`Pod "train-main-x" is invalid: spec.containers[0].image: Required value`), false, false},
		"a timeout":                   {apierrors.NewTimeoutError("slow", 1), false, false},
	}
	for name, tc := range cases {
		msg, final, refused := podRefusal(tc.err)
		if refused != tc.refused || final != tc.final || refused != (msg != "") {
			t.Errorf("%s: podRefusal = %q, final %v, refused %v; want refused %v, final %v", name, msg, final, refused, tc.refused, tc.final)
		}
	}
}
